import { writeFileSync } from 'node:fs';
import { detailJsonSchema, lifecycleDetailTypes } from '../functions/contract/lifecycle-events';
import { runAsScript } from '../functions/package/run-as-script';

/**
 * `npm run events:schemas`: writes the JSON Schema of each lifecycle event's detail to
 * docs/events/v1/. A test fails when the files differ from what this would write.
 */
export function schemaFiles(): Record<string, string> {
  return Object.fromEntries(
    lifecycleDetailTypes.map((type) => [
      `docs/events/v1/${type}.schema.json`,
      `${JSON.stringify(detailJsonSchema(type), null, 2)}\n`,
    ]),
  );
}

if (runAsScript(import.meta.url)) {
  for (const [path, text] of Object.entries(schemaFiles())) writeFileSync(path, text);
}
