//! Property tests of the stat cache file (`.trellis/index`): the encoding
//! round-trips, and a torn, damaged or forged file (its check digest
//! recomputed, so the body parser itself is exercised) decodes to a cache or
//! to nothing, never a panic, with bounded allocation.
//!
//! Its properties: `the_stat_cache_round_trips`,
//! `a_damaged_stat_cache_is_ignored_or_read`,
//! `a_forged_stat_cache_decodes_within_its_size`.

use proptest::prelude::*;
use trellis_core::fuzz;

use super::*;

fn stat() -> impl Strategy<Value = FileStat> {
    (
        any::<u64>(),
        any::<i64>(),
        any::<i64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(size, mtime_ns, ctime_ns, inode, mode)| FileStat {
            size,
            mtime_ns,
            ctime_ns,
            inode,
            mode,
        })
}

fn cached() -> impl Strategy<Value = CachedEntry> {
    let kind = prop::sample::select(vec![
        EntryKind::File { executable: false },
        EntryKind::File { executable: true },
        EntryKind::Symlink,
    ]);
    (stat(), kind, any::<[u8; 32]>(), any::<u64>(), any::<i64>()).prop_map(
        |(stat, kind, blob, size, read_at_ns)| CachedEntry {
            stat,
            entry: Entry {
                kind,
                blob: Digest(blob),
                size,
            },
            read_at_ns,
        },
    )
}

fn cache() -> impl Strategy<Value = StatCache> {
    prop::collection::hash_map("[a-zA-Z0-9_./é-]{1,40}", cached(), 0..24)
}

fn encoded(cache: &StatCache) -> Vec<u8> {
    let mut files: Vec<(&String, &CachedEntry)> = cache.iter().collect();
    files.sort_by_key(|(path, _)| *path);
    encode_cache(&files)
}

/// `bytes` with its trailing check digest recomputed over the (damaged) body.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.truncate(bytes.len().saturating_sub(32));
    let check = blob_digest(&bytes);
    bytes.extend_from_slice(&check.0);
    bytes
}

fn decode_bounded(bytes: &[u8]) -> Option<StatCache> {
    fuzz::bounded("decode_cache", fuzz::budget(bytes.len()), || {
        decode_cache(bytes)
    })
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    #[test]
    fn the_stat_cache_round_trips(cache in cache()) {
        prop_assert_eq!(decode_bounded(&encoded(&cache)), Some(cache));
    }

    /// Damage the check digest catches is refused as a whole.
    #[test]
    fn a_damaged_stat_cache_is_ignored_or_read(cache in cache(), edits in fuzz::byte_edits()) {
        let bytes = encoded(&cache);
        let damaged = fuzz::apply_bytes(&bytes, &edits);
        let decoded = decode_bounded(&damaged);
        if damaged != bytes {
            prop_assert_eq!(decoded, None);
        }
    }

    /// A forged body (consistent digest) is a cache or nothing; never more
    /// entries than its bytes can hold.
    #[test]
    fn a_forged_stat_cache_decodes_within_its_size(cache in cache(), edits in fuzz::byte_edits()) {
        let forged = resealed(fuzz::apply_bytes(&encoded(&cache), &edits));
        if let Some(decoded) = decode_bounded(&forged) {
            prop_assert!(decoded.len() <= forged.len() / MIN_ENTRY_BYTES);
        }
    }
}

/// Found by `a_forged_stat_cache_decodes_within_its_size`: a header claiming
/// 2^64 - 1 entries reserved room for a million before reading one.
#[test]
fn a_forged_entry_count_does_not_reserve_memory() {
    let mut body = CACHE_MAGIC.to_vec();
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    body.extend_from_slice(&[0; 32]);
    let forged = resealed(body);
    assert_eq!(decode_bounded(&forged), None);
}
