import ortPackage from 'onnxruntime-node/package.json' with { type: 'json' };
import packageJson from '../../package.json' with { type: 'json' };

/** What the server says about itself: OpenAPI `info`, MCP `serverInfo` and `_meta`. */
export interface ServerInfo {
  name: 'encoder';
  /** The runtime's version (package.json), the same for every model built with it. */
  version: string;
  build: {
    /** Node.js version the process runs on (in a single executable: the embedded one). */
    node: string;
    /** onnxruntime-node's version; a JSON import so that esbuild inlines it into the single executable. */
    onnxruntime: string;
    /** Target triple of the executable, e.g. x86_64-unknown-linux-gnu. */
    target: string;
  };
}

export function serverInfo(options: { target: string }): ServerInfo {
  return {
    name: 'encoder',
    version: packageJson.version,
    build: { node: process.versions.node, onnxruntime: ortPackage.version, target: options.target },
  };
}
