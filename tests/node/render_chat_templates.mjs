// Renders chat-template cases with @huggingface/jinja, the independent renderer that
// kvrt's differential test (src/kvrt/jinja/test/differential_test.cpp) compares with.
//   node render_chat_templates.mjs CASES.json > RESULTS.json
// CASES.json: [{"template": "...", "context": {...}}]; RESULTS.json has one entry per
// case: {"ok": true, "text": "..."} or {"ok": false, "error": "..."}.
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = cases.map(({ template, context }) => {
  try {
    return { ok: true, text: new Template(template).render(context) };
  } catch (error) {
    return { ok: false, error: String(error && error.message ? error.message : error) };
  }
});
process.stdout.write(JSON.stringify(results));
