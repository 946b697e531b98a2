/**
 * startEncoderServer: an address that cannot be listened on (in use, not on this machine) is a ConfigError naming
 * the front end and the address, not an internal error with a stack trace; nothing stays open after it.
 * prepareEncoderServer: front ends built around a predictor still loading, listening only when asked.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import type { BatchingPredictor } from '../../src/encoder/predictor.ts';
import { LatePredictor } from '../../src/encoder/late-predictor.ts';
import { prepareEncoderServer, startEncoderServer } from '../../src/serve/encoder-server.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const predictor: BatchingPredictor = {
  batchingStats: () => ({ requests: 0, runs: 0, failedRuns: 0, isolatedRuns: 0, sequences: 0, tokens: 0, paddedTokens: 0, largestBatchTokens: 0, oversizeRuns: 0, queuedSequences: 0, runsInFlight: 0 }),
  observeBatches: () => () => {},
  modelId: 'm',
  modelType: 'embedding',
  metadata: () => ({ model_id: 'm', model_type: 'embedding' }),
  predict: () => Promise.resolve({ results: [], model_id: 'm' }),
  embed: () => Promise.resolve({ model_id: 'm', vectors: [], promptTokens: 0 }),
  rerank: () => Promise.reject(new Error('not a cross-encoder')),
  tokenize: () => Promise.reject(new Error('unused')),
  decode: () => Promise.reject(new Error('unused')),
  servingLimits: stubServingLimits,
};
const protoText = readFileSync(path.join(repoRoot, 'proto', 'encoder.proto'), 'utf8');

let blocker: net.Server;
let busyPort: number;

beforeAll(async () => {
  blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  busyPort = (blocker.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => blocker.close(resolve));
});

async function failure(options: Parameters<typeof startEncoderServer>[1]): Promise<Error> {
  try {
    const server = await startEncoderServer(predictor, options);
    await server.close();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the start to fail');
}

describe('startEncoderServer: addresses it cannot listen on', () => {
  it('HTTP on a port in use', async () => {
    const error = await failure({ http: { host: '127.0.0.1', port: busyPort, bodyLimitBytes: 1024 }, grpc: null, target: 't' });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(`HTTP cannot listen on 127.0.0.1:${busyPort}: the address is already in use (--http-port, --http-hostname)`);
  });

  it('gRPC on a port in use (after HTTP started)', async () => {
    const error = await failure({
      http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 },
      grpc: { host: '127.0.0.1', port: busyPort, protoText },
      target: 't',
    });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(`gRPC cannot listen on 127.0.0.1:${busyPort}: the address is already in use (--grpc-port, --grpc-hostname)`);
  });

  it('an address that is not on this machine', async () => {
    const error = await failure({ http: { host: '192.0.2.1', port: 0, bodyLimitBytes: 1024 }, grpc: null, target: 't' });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('HTTP cannot listen on 192.0.2.1:0: the address is not available on this machine (--http-port, --http-hostname)');
  });
});

describe('prepareEncoderServer: front ends built before the model has loaded', () => {
  it('listens only when asked, and then answers through the predictor bound meanwhile', async () => {
    const late = new LatePredictor('m', 'embedding');
    const prepared = await prepareEncoderServer(late, { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 }, grpc: { host: '127.0.0.1', port: 0, protoText }, target: 't' });
    late.bind(predictor);
    const server = await prepared.listen();
    try {
      const response = await fetch(`${server.httpUrl!}/model`);
      expect(await response.json()).toEqual({ model_id: 'm', model_type: 'embedding' });
      expect(server.grpcPort).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  it('discards front ends that never listened (the model failed to load)', async () => {
    const prepared = await prepareEncoderServer(new LatePredictor('m', 'embedding'), {
      http: { host: '127.0.0.1', port: busyPort, bodyLimitBytes: 1024 },
      grpc: { host: '127.0.0.1', port: busyPort, protoText },
      target: 't',
    });
    // building took no address: the port in use does not matter until listen
    await expect(prepared.discard()).resolves.toBeUndefined();
  });

  it('fails to build with a proto text that does not parse, leaving nothing open', async () => {
    await expect(
      prepareEncoderServer(predictor, { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1024 }, grpc: { host: '127.0.0.1', port: 0, protoText: 'message {' }, target: 't' }),
    ).rejects.toThrow(ConfigError);
  });
});
