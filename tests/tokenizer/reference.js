#!/usr/bin/env node
// Reference ids from tokenizers.js (npm @huggingface/tokenizers) for nxrt_tokenize check.
//
//   node reference.js --modules DIR --tokenizer tokenizer.json [--config tokenizer_config.json]
//                     --corpus corpus.txt --out cases.json
//                     [--template-bos OUT_TOKENIZER.json]
//
// DIR holds node_modules with @huggingface/tokenizers. Test texts made from the corpus:
//   every line; every paragraph (lines between blank lines, joined with "\n"); every paragraph with
//   "\r\n" line ends; the whole file. Each is encoded with add_special_tokens=true, and the first 40
//   also with false. Writes {"cases": [{text, add_special_tokens, ids, decoded, roundtrip}]}.
// --template-bos: first replace the post_processor with Llama-3's (ByteLevel + TemplateProcessing
// adding <|begin_of_text|>) and write that tokenizer.json to OUT_TOKENIZER.json for the C++ side.
'use strict';
const fs = require('fs');
const path = require('path');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['modules', 'tokenizer', 'corpus', 'out']) {
  if (!args[k]) {
    console.error(`reference.js: missing --${k}`);
    process.exit(2);
  }
}
const { Tokenizer } = require(require.resolve('@huggingface/tokenizers', { paths: [path.resolve(args.modules)] }));

const tokenizerJson = JSON.parse(fs.readFileSync(args.tokenizer, 'utf8'));
const config = args.config ? JSON.parse(fs.readFileSync(args.config, 'utf8')) : {};
if (args['template-bos']) {
  const bos = '<|begin_of_text|>';
  const bosToken = tokenizerJson.added_tokens.find((t) => t.content === bos);
  if (!bosToken) throw new Error(`--template-bos: ${bos} is not an added token`);
  tokenizerJson.post_processor = {
    type: 'Sequence',
    processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [
          { SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } },
        ],
        special_tokens: { [bos]: { id: bos, ids: [bosToken.id], tokens: [bos] } },
      },
    ],
  };
  fs.writeFileSync(args['template-bos'], JSON.stringify(tokenizerJson));
}
const tokenizer = new Tokenizer(tokenizerJson, config);

const corpus = fs.readFileSync(args.corpus, 'utf8');
const lines = corpus.split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const texts = [...lines];
const paragraphs = [];
let current = [];
for (const l of lines) {
  if (l === '') {
    if (current.length > 1) paragraphs.push(current.join('\n'));
    current = [];
  } else {
    current.push(l);
  }
}
if (current.length > 1) paragraphs.push(current.join('\n'));
texts.push(...paragraphs);
texts.push(...paragraphs.map((p) => p.split('\n').join('\r\n')));
texts.push(corpus);

const unicodeForms = [];
(function collect(n) {
  if (!n) return;
  if (['NFC', 'NFD', 'NFKC', 'NFKD'].includes(n.type)) unicodeForms.push(n.type);
  (n.normalizers || []).forEach(collect);
})(tokenizerJson.normalizer);

const cases = [];
const encode = (text, add) => {
  const ids = tokenizer.encode(text, { add_special_tokens: add }).ids;
  const decoded = ids.length ? tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : '';
  // What decode(encode(text)) should give back: the text after the normalizer's Unicode
  // normalization forms (NFC for Qwen3); Prepend/Replace normalizers are undone by the decoder.
  const roundtrip = unicodeForms.reduce((t, f) => t.normalize(f), text);
  cases.push({ text, add_special_tokens: add, ids, decoded, roundtrip });
};
texts.forEach((t) => encode(t, true));
texts.slice(0, 40).forEach((t) => encode(t, false));
fs.writeFileSync(args.out, JSON.stringify({ cases }));
console.log(`reference.js: ${cases.length} cases from ${lines.length} lines -> ${args.out}`);
