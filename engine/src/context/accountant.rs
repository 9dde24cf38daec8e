//! The versioned token accountant of every route and the input allowance
//! β_in = β_win − β_out − β_tool − β_guard (Definition 6).
//!
//! The model's own tokenizer is unknown to Trellis (an OpenAI-compatible
//! endpoint does not publish it), so the accountant is a documented
//! approximation: an ASCII byte counts a third of a token (BPE vocabularies
//! average three and a half to four and a half bytes a token on code and
//! English), every other character a whole token (CJK and symbols are often
//! one token each), and every message costs [`MESSAGE_OVERHEAD`] for its
//! role and framing. `β_guard` reserves a sixteenth of the window (at least
//! [`MIN_GUARD`]) for the approximation's error. The accountant's identity
//! is recorded with every plan: changing the arithmetic means a new version.
//! Pure: it never reads anything but its arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The accountant's identity, as ledgered: `(id, version)`.
pub const ACCOUNTANT: (&str, u32) = ("trellis.ascii-thirds", 1);

/// Tokens charged per message for its role and framing.
pub const MESSAGE_OVERHEAD: u64 = 8;

/// Tokens of the request envelope besides the messages and tools
/// (`model`, `tool_choice`, `max_tokens`, the JSON around them).
const ENVELOPE_TOKENS: u64 = 32;

/// The smallest guard reserve, whatever the window.
pub const MIN_GUARD: u64 = 64;

/// Tokens of `text` under the accountant.
pub fn text_tokens(text: &str) -> u64 {
    let ascii = text.bytes().filter(u8::is_ascii).count() as u64;
    let other = text.chars().filter(|c| !c.is_ascii()).count() as u64;
    ascii.div_ceil(3) + other
}

/// What paging needs of a conversation message: its cost under the
/// accountant and a note in Trellis's own words to stand in for a page.
/// The actor's `ChatMessage` implements it; paging never looks inside.
pub trait Message: Clone + Serialize {
    /// Tokens of the message: its text fields under [`text_tokens`], plus
    /// [`MESSAGE_OVERHEAD`].
    fn tokens(&self) -> u64;
    /// A Trellis-authored note (a tombstone).
    fn note(content: String) -> Self;
}

pub fn messages_tokens<M: Message>(messages: &[M]) -> u64 {
    messages.iter().map(Message::tokens).sum()
}

/// The budget of one route under the accountant: the window, its
/// reservations, and the input allowance left for instructions and pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowance {
    pub accountant: String,
    pub accountant_version: u32,
    /// β_win: the endpoint's `context_window_tokens`.
    pub window: u64,
    /// β_out: the endpoint's `max_output_tokens`.
    pub output: u64,
    /// β_tool: the serialized tool schemas and the request envelope.
    pub tools: u64,
    /// β_guard: the reserve for the accountant's error.
    pub guard: u64,
    /// β_in, zero when the reservations exceed the window.
    pub input: u64,
}

impl Allowance {
    /// The allowance of a route with `window` tokens, `output` reserved for
    /// the answer, offering the tool declarations `tools`.
    pub fn for_route(window: u64, output: u64, tools: &[Value]) -> Allowance {
        let tools = tools
            .iter()
            .map(|t| text_tokens(&t.to_string()))
            .sum::<u64>()
            + ENVELOPE_TOKENS;
        let guard = (window / 16).max(MIN_GUARD);
        Allowance {
            accountant: ACCOUNTANT.0.to_owned(),
            accountant_version: ACCOUNTANT.1,
            window,
            output,
            tools,
            guard,
            input: window.saturating_sub(output + tools + guard),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn ascii_counts_a_third_and_other_characters_one_each() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abc"), 1);
        assert_eq!(text_tokens("abcd"), 2);
        assert_eq!(text_tokens("日本語"), 3);
        assert_eq!(
            crate::context::testing::Msg::Note("abcdef".into()).tokens(),
            2 + MESSAGE_OVERHEAD
        );
    }

    #[test]
    fn the_allowance_subtracts_every_reservation_and_never_underflows() {
        let tools = [json!({ "name": "read_file" })];
        let a = Allowance::for_route(4096, 512, &tools);
        assert_eq!(a.guard, 256);
        assert_eq!(a.input, 4096 - 512 - a.tools - 256);
        assert!(a.tools > ENVELOPE_TOKENS);
        assert_eq!(Allowance::for_route(100, 512, &tools).input, 0);
    }

    proptest! {
        #[test]
        fn tokens_are_additive_and_monotone(a in ".{0,64}", b in ".{0,64}") {
            let joined = format!("{a}{b}");
            prop_assert!(text_tokens(&joined) <= text_tokens(&a) + text_tokens(&b) + 1);
            prop_assert!(text_tokens(&joined) >= text_tokens(&a));
            prop_assert_eq!(text_tokens(&joined), text_tokens(&joined));
        }
    }
}
