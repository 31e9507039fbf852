// Validate ckptlog input events against the generated JSON Schema before producing them.
//   npm install && node validate.mjs < events.jsonl     (one CloudEvents JSON object per line)
// Prints "ok" or "invalid: <errors>" per line; exits 1 if any line is invalid. docs/schemas.md
// shows the same `problems` in front of a Kafka producer.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import Ajv2020 from "ajv/dist/2020.js";

const schemaPath = process.env.INPUT_EVENT_SCHEMA ?? new URL("../../schemas/input-event.schema.json", import.meta.url);
const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
// strict: false -- the schema carries OpenAPI's `discriminator` annotation, unknown to plain JSON Schema
const ajv = new Ajv2020({ strict: false, allErrors: true });
export const validate = ajv.compile(schema); // the whole union: true or false
const byType = Object.fromEntries(  // one validator per `type`, for errors that name the right fields
  Object.entries(schema.discriminator.mapping).map(([type, ref]) => [type, ajv.getSchema(`${schema.$id ?? ""}${ref}`)]),
);

/** null when `event` is a valid ckptlog input event, else what is wrong with it. */
export function problems(event) {
  if (validate(event)) return null;
  const branch = byType[event?.type];
  if (!branch) return `/type must be one of ${Object.keys(byType).join(", ")}`;
  branch(event);
  return branch.errors.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  let bad = 0;
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const why = problems(JSON.parse(line));
    console.log(why === null ? "ok" : `invalid: ${why}`);
    bad += why === null ? 0 : 1;
  }
  process.exit(bad ? 1 : 0);
}
