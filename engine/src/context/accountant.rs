//! The versioned token accountants of the model routes, and the input
//! allowance β_in = β_win − β_out − β_tool − β_guard (Definition 6).
//!
//! The model's own tokenizer is unknown to Trellis (an OpenAI-compatible
//! endpoint does not publish it), and an accountant that underestimates is
//! not valid, so the current accountant, [`Accountant::Utf8Bytes`], charges
//! what holds for every byte-level BPE (GPT-4's, Qwen's, LLaMA 3's) and
//! every byte-fallback SentencePiece (LLaMA 2's, Mistral's): a token covers
//! at least one byte of the text, since a merge only joins bytes and a
//! fallback token is one byte, and the only token covering none is the
//! word-boundary prefix SentencePiece puts before a text. So a text costs
//! its UTF-8 bytes plus one, whatever it holds: hex digests, base64,
//! numbers, CJK, emoji (`engine/tests/it/accountant_bound.rs` checks it
//! against four real tokenizers on adversarial text). The price is
//! tightness: on this repository's Rust, TypeScript and Markdown the charge
//! is 4.0–4.7 times what GPT-4's, GPT-4o's and Qwen3's tokenizers count,
//! and 3.2–3.5 times LLaMA 2's. Tables of what tokenizers merge were tried
//! and dropped: a tokenizer may merge across any boundary a table assumes
//! (one of 55,000 adversarial strings beat them under LLaMA 2), and a route's
//! tokenizer need not be one the tables were measured on. Not covered: a
//! tokenizer whose normalizer expands text (NFKC turns `ﬁ` into `fi`);
//! calibration (`context::calibration`) catches such a route after its
//! first request.
//!
//! A message costs its texts plus [`MESSAGE_OVERHEAD`] for its role and
//! framing, and each tool call in it [`TOOL_CALL_OVERHEAD`] for the chat
//! template's. `β_guard` reserves a sixteenth of the window (at least
//! [`MIN_GUARD`]) for what no accountant can see (an unusual chat
//! template).
//!
//! Every allowance names its accountant, and every plan carries its
//! allowance, so a recorded plan is checked under the arithmetic it was
//! made with: [`Accountant::AsciiThirds`] (a third of a token per ASCII
//! byte, which dense text overruns) is kept for the plans ledgered before
//! the byte charge. Changing an accountant's arithmetic means a new
//! version. Pure: it never reads anything but its arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// No calibration (`Allowance::calibration` in thousandths): a charge is
/// taken at its word.
pub const UNCALIBRATED: u32 = 1000;

fn uncalibrated() -> u32 {
    UNCALIBRATED
}

fn is_uncalibrated(calibration: &u32) -> bool {
    *calibration == UNCALIBRATED
}

/// A versioned token accountant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accountant {
    /// `trellis.ascii-thirds` v1: an ASCII byte a third of a token, any
    /// other character one. Not a bound; kept for replay of its plans.
    AsciiThirds,
    /// `trellis.utf8-bytes` v1: a token per UTF-8 byte and one per text,
    /// an upper bound; calibrated by what the endpoint reports.
    Utf8Bytes,
}

/// Tokens charged per message for its role and framing.
pub const MESSAGE_OVERHEAD: u64 = 8;

/// Tokens charged per tool call for the chat template's framing of it
/// (`<tool_call>{"name": …, "arguments": …}</tool_call>` and the like).
pub const TOOL_CALL_OVERHEAD: u64 = 16;

/// The smallest guard reserve, whatever the window.
pub const MIN_GUARD: u64 = 64;

impl Accountant {
    /// The accountant new plans are made under.
    pub const CURRENT: Accountant = Accountant::Utf8Bytes;

    /// Its identity, as ledgered: `(id, version)`.
    pub fn identity(self) -> (&'static str, u32) {
        match self {
            Accountant::AsciiThirds => ("trellis.ascii-thirds", 1),
            Accountant::Utf8Bytes => ("trellis.utf8-bytes", 1),
        }
    }

    /// The accountant a plan recorded, or an error naming it.
    pub fn named(id: &str, version: u32) -> Result<Accountant, String> {
        [Accountant::AsciiThirds, Accountant::Utf8Bytes]
            .into_iter()
            .find(|a| a.identity() == (id, version))
            .ok_or_else(|| format!("token accountant {id} v{version} is not in this build"))
    }

    /// Whether plans under it follow the endpoint's reported usage
    /// (`context::calibration`).
    pub fn calibrates(self) -> bool {
        self == Accountant::Utf8Bytes
    }

    /// Tokens of `text`.
    pub fn text(self, text: &str) -> u64 {
        match self {
            Accountant::AsciiThirds => {
                let ascii = text.bytes().filter(u8::is_ascii).count() as u64;
                let other = text.chars().filter(|c| !c.is_ascii()).count() as u64;
                ascii.div_ceil(3) + other
            }
            // The SentencePiece prefix, then at most a token a byte.
            Accountant::Utf8Bytes if text.is_empty() => 0,
            Accountant::Utf8Bytes => text.len() as u64 + 1,
        }
    }

    /// Tokens of one message: its texts, [`MESSAGE_OVERHEAD`], and each
    /// tool call's framing.
    pub fn message<M: Message>(self, message: &M) -> u64 {
        let calls = match self {
            Accountant::AsciiThirds => 0,
            Accountant::Utf8Bytes => message.tool_calls() as u64 * TOOL_CALL_OVERHEAD,
        };
        message
            .texts()
            .into_iter()
            .map(|t| self.text(t))
            .sum::<u64>()
            + MESSAGE_OVERHEAD
            + calls
    }

    pub fn messages<M: Message>(self, messages: &[M]) -> u64 {
        messages.iter().map(|m| self.message(m)).sum()
    }

    /// β_tool: tokens of the tool declarations `tools` and the envelope.
    pub fn tools(self, tools: &[Value]) -> u64 {
        tools.iter().map(|t| self.text(&t.to_string())).sum::<u64>() + self.envelope()
    }

    /// Tokens of the request envelope besides the messages and tools:
    /// `model`, `tool_choice`, `max_tokens`, the JSON around them, and
    /// for the byte charge the preamble a chat template puts before the
    /// tool list (Qwen's is about 90 tokens).
    fn envelope(self) -> u64 {
        match self {
            Accountant::AsciiThirds => 32,
            Accountant::Utf8Bytes => 128,
        }
    }
}

/// What paging needs of a conversation message: the texts the model is
/// shown of it, and a note in Trellis's own words to stand in for a page.
/// The actor's `ChatMessage` implements it; paging never looks inside.
pub trait Message: Clone + Serialize {
    /// Every text the message carries: its content, its tool calls' names,
    /// arguments and ids, a result's call id.
    fn texts(&self) -> Vec<&str>;
    /// How many tool calls it makes.
    fn tool_calls(&self) -> usize;
    /// A Trellis-authored note (a tombstone).
    fn note(content: String) -> Self;
}

/// Which form of the tool schemas a request offers, and β_tool charges:
/// the full descriptions, or the compact discovery summaries and bare
/// argument types (chosen by [`fixed_overhead`](super::fixed_overhead)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolForm {
    #[default]
    Full,
    Compact,
}

impl ToolForm {
    pub fn is_full(&self) -> bool {
        *self == ToolForm::Full
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolForm::Full => "full",
            ToolForm::Compact => "compact",
        }
    }
}

/// The budget of one route under an accountant: the window, its
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
    /// The form of the schemas β_tool charges and the request offers.
    /// Absent (full) in every plan made before there was a compact form.
    #[serde(default, skip_serializing_if = "ToolForm::is_full")]
    pub tool_form: ToolForm,
    /// β_guard: the reserve for the accountant's error.
    pub guard: u64,
    /// β_in, zero when the reservations exceed the window.
    pub input: u64,
    /// The route's calibration in thousandths: what the endpoint counted
    /// per token charged, at most, in the requests before this one. β_in
    /// is what is left once the window less output and guard is divided
    /// by it. Absent (1000) until an endpoint reports more than planned.
    #[serde(default = "uncalibrated", skip_serializing_if = "is_uncalibrated")]
    pub calibration: u32,
}

impl Allowance {
    /// The allowance of a route with `window` tokens, `output` reserved for
    /// the answer, offering the tool declarations `tools` (in `form`),
    /// under the current accountant at `calibration` (thousandths,
    /// [`UNCALIBRATED`] for none).
    pub fn for_route(
        window: u64,
        output: u64,
        (form, tools): (ToolForm, &[Value]),
        calibration: u32,
    ) -> Allowance {
        let accountant = Accountant::CURRENT;
        let tools = accountant.tools(tools);
        let guard = (window / 16).max(MIN_GUARD);
        let calibration = calibration.max(UNCALIBRATED);
        let room = window.saturating_sub(output + guard);
        let (id, version) = accountant.identity();
        Allowance {
            accountant: id.to_owned(),
            accountant_version: version,
            window,
            output,
            tools,
            tool_form: form,
            guard,
            input: (room * u64::from(UNCALIBRATED) / u64::from(calibration)).saturating_sub(tools),
            calibration,
        }
    }

    /// The accountant this allowance was made under.
    pub fn accountant(&self) -> Result<Accountant, String> {
        Accountant::named(&self.accountant, self.accountant_version)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::context::testing::Msg;

    #[test]
    fn ascii_thirds_counts_a_third_and_other_characters_one_each() {
        let old = Accountant::AsciiThirds;
        assert_eq!(old.text(""), 0);
        assert_eq!(old.text("abc"), 1);
        assert_eq!(old.text("abcd"), 2);
        assert_eq!(old.text("日本語"), 3);
        assert_eq!(
            old.message(&Msg::Note("abcdef".into())),
            2 + MESSAGE_OVERHEAD
        );
        let call = Msg::Call {
            id: "c1".into(),
            tool: "read_file".into(),
            arguments: "{}".into(),
        };
        assert_eq!(old.message(&call), 1 + 3 + 1 + MESSAGE_OVERHEAD);
    }

    #[test]
    fn the_byte_charge_is_a_token_a_byte_plus_one_and_frames_tool_calls() {
        let new = Accountant::CURRENT;
        assert_eq!(new.text(""), 0);
        let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert_eq!(new.text(digest), 64 + 1);
        assert!(Accountant::AsciiThirds.text(digest) < 64 / 2);
        assert_eq!(new.text("日本語😀"), 9 + 4 + 1);
        let call = Msg::Call {
            id: "c1".into(),
            tool: "read_file".into(),
            arguments: "{}".into(),
        };
        assert_eq!(
            new.message(&call),
            3 + 10 + 3 + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD
        );
    }

    #[test]
    fn a_recorded_accountant_is_found_by_its_identity_or_refused() {
        for a in [Accountant::AsciiThirds, Accountant::Utf8Bytes] {
            let (id, version) = a.identity();
            assert_eq!(Accountant::named(id, version), Ok(a));
        }
        let error = Accountant::named("trellis.ascii-thirds", 2).unwrap_err();
        assert!(error.contains("trellis.ascii-thirds v2"), "{error}");
    }

    #[test]
    fn the_allowance_subtracts_every_reservation_and_never_underflows() {
        let tools = [json!({ "name": "read_file" })];
        let a = Allowance::for_route(4096, 512, (ToolForm::Full, &tools), UNCALIBRATED);
        assert_eq!(a.guard, 256);
        assert_eq!(a.input, 4096 - 512 - a.tools - 256);
        assert!(a.tools > Accountant::CURRENT.envelope());
        assert_eq!(a.accountant(), Ok(Accountant::CURRENT));
        assert_eq!(
            Allowance::for_route(100, 512, (ToolForm::Full, &tools), UNCALIBRATED).input,
            0
        );
    }

    #[test]
    fn a_calibration_shrinks_the_input_allowance_and_is_recorded_only_when_set() {
        let plain = Allowance::for_route(4096, 512, (ToolForm::Full, &[]), UNCALIBRATED);
        let calibrated = Allowance::for_route(4096, 512, (ToolForm::Full, &[]), 1500);
        assert_eq!(calibrated.calibration, 1500);
        assert_eq!(
            calibrated.input,
            (4096 - 512 - 256) * 2 / 3 - calibrated.tools
        );
        assert!(calibrated.input < plain.input);
        // Below one is no calibration: the charge is a bound already.
        assert_eq!(
            Allowance::for_route(4096, 512, (ToolForm::Full, &[]), 10),
            plain
        );
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("calibration").is_none(), "{json}");
        let back: Allowance = serde_json::from_value(json).unwrap();
        assert_eq!(back, plain);
        let json = serde_json::to_value(&calibrated).unwrap();
        assert_eq!(json["calibration"], 1500);
    }
}
