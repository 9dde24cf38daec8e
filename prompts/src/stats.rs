//! A seeded paired percentile bootstrap with its own small PRNG, so the
//! resampling procedure is fully specified by (seed, resample count) and
//! reproducible on any platform and with any dependency versions.

/// splitmix64: expands one seed into the xoshiro state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256**: fast, well-tested, and trivially portable.
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    pub fn seed(seed: u64) -> Self {
        let mut sm = seed;
        Xoshiro256 {
            s: [
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
                splitmix64(&mut sm),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` without modulo bias (rejection sampling).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0) has no values");
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// A two-sided percentile interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    pub lower: f64,
    pub upper: f64,
}

/// Paired bootstrap of the mean of each metric's per-task differences, all
/// metrics resampled with the same task indices. Returns one 95 % percentile
/// interval per metric: the 2.5th percentile is the sorted mean at index
/// `floor(0.025 B)` and the 97.5th at `ceil(0.975 B) - 1`.
pub fn paired_bootstrap(differences: &[Vec<f64>], resamples: usize, seed: u64) -> Vec<Interval> {
    let n = differences.first().map_or(0, Vec::len);
    if n == 0 || resamples == 0 {
        return vec![
            Interval {
                lower: f64::NAN,
                upper: f64::NAN
            };
            differences.len()
        ];
    }
    let mut rng = Xoshiro256::seed(seed);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); differences.len()];
    let mut sums = vec![0.0; differences.len()];
    for _ in 0..resamples {
        sums.iter_mut().for_each(|s| *s = 0.0);
        for _ in 0..n {
            let i = rng.below(n as u64) as usize;
            for (metric, diffs) in differences.iter().enumerate() {
                sums[metric] += diffs[i];
            }
        }
        for (metric, sum) in sums.iter().enumerate() {
            means[metric].push(sum / n as f64);
        }
    }
    let lo = (0.025 * resamples as f64).floor() as usize;
    let hi = ((0.975 * resamples as f64).ceil() as usize).saturating_sub(1);
    means
        .into_iter()
        .map(|mut m| {
            m.sort_by(f64::total_cmp);
            Interval {
                lower: m[lo],
                upper: m[hi.min(m.len() - 1)],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_reproducible_and_seed_sensitive() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Xoshiro256::seed(1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Xoshiro256::seed(1);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = Xoshiro256::seed(2);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn constant_differences_give_a_degenerate_interval() {
        let intervals = paired_bootstrap(&[vec![0.5; 40]], 1000, 9);
        assert_eq!(
            intervals[0],
            Interval {
                lower: 0.5,
                upper: 0.5
            }
        );
    }

    #[test]
    fn interval_brackets_the_sample_mean() {
        let diffs: Vec<f64> = (0..40)
            .map(|i| if i % 4 == 0 { 1.0 } else { 0.0 })
            .collect();
        let interval = paired_bootstrap(&[diffs], 2000, 3)[0];
        assert!(
            interval.lower < 0.25 && 0.25 < interval.upper,
            "{interval:?}"
        );
    }
}
