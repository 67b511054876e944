/**
 * Lets esbuild leave out the AWS SDK schemas we never use.
 *
 * Each SDK v3 client ships its operation and shape schemas in one generated ES module
 * (`dist-es/schemas/schemas_0.js`) and writes their traits with computed keys read from module
 * constants: `{ [_xN]: "snapshotId" }`, where `const _xN = "xmlName"`. esbuild 0.28 cannot prove
 * that a key computed from a variable has no side effect (a key that is an object would run its
 * `toString`), so it keeps every statement holding one, used or not. For the EC2 client that is
 * 550 KiB of the 1.4 MiB bundle (issue 21), though we call ten of its operations.
 *
 * The plugin puts the constant's string in place of the computed key (`{ "xmlName": … }`), which is
 * the same object, so esbuild's tree shaking drops what nothing references. Only a key whose
 * constant is a plain string literal declared at the top of the same file is replaced; anything
 * else is left as it was.
 */
import { readFile } from 'node:fs/promises';
import type { Plugin } from 'esbuild';

/** The SDK's generated schema modules (clients and the nested STS/SSO clients). */
export const schemaModulePattern =
  /[\\/]node_modules[\\/]@aws-sdk[\\/][^\\/]+[\\/]dist-es[\\/](?:submodules[\\/][^\\/]+[\\/])?schemas[\\/]schemas_\d+\.js$/;

const stringConstant = /^const ([A-Za-z_$][\w$]*) = ("(?:[^"\\\n]|\\.)*");$/gm;
const computedKey = /\[([A-Za-z_$][\w$]*)\]:/g;

/** The schema module's text with each computed key of a string constant written as that string. */
export function inlineSchemaKeys(source: string): string {
  const constants = new Map<string, string>();
  for (const [, name, literal] of source.matchAll(stringConstant)) {
    if (name !== undefined && literal !== undefined) constants.set(name, literal);
  }
  return source.replace(computedKey, (key, name: string) => {
    const literal = constants.get(name);
    return literal === undefined ? key : `${literal}:`;
  });
}

export const inlineSdkSchemaKeys: Plugin = {
  name: 'inline-sdk-schema-keys',
  setup(build) {
    build.onLoad({ filter: schemaModulePattern }, async (args) => ({
      contents: inlineSchemaKeys(await readFile(args.path, 'utf8')),
      loader: 'js',
    }));
  },
};
