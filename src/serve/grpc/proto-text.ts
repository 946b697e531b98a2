import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { ConfigError } from '../../encoder/errors.ts';
import { adoptHeldTexts, LARGE_TEXT_UNITS, resolveHeldTexts } from '../../encoder/large-texts.ts';
import { HoldingReader } from './holding-reader.ts';

/**
 * The text of a .proto file, parsed without touching the file system: the single executable carries the text (a SEA
 * asset or a constant), never a path to read. Several texts (one per package, as separate files would hold them) are
 * parsed into one root, where their references to each other's types resolve. `keepCase` keeps the field names as
 * written (else camelCase); it is decided at parse time, since the parsed names are what messages and descriptors
 * carry. `label` names the text in errors: one that does not parse or names an unknown type is a ConfigError.
 */
export function parseProtoText(protoText: string | readonly string[], label: string, keepCase = true): protobuf.Root {
  try {
    const root = new protobuf.Root();
    for (const text of [protoText].flat()) protobuf.parse(text, root, { keepCase });
    root.resolveAll();
    return root;
  } catch (error) {
    throw new ConfigError(`${label} is not a usable .proto text: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/**
 * grpc-js's definition of the service `name` in `root`, which must have every one of `methods` (else a ConfigError).
 * Messages are decoded into plain objects shaped by `shape` (protobufjs's conversion options: enums as names,
 * defaults filled in, …) and encoded from such objects, as @grpc/proto-loader does; proto-loader itself is not used
 * here because it also builds every type's descriptors, the larger part of gRPC's start-up (docs/benchmarks.md).
 * Server reflection builds those on its first call (reflection.ts).
 */
export function grpcServiceDefinition(
  root: protobuf.Root,
  name: string,
  methods: readonly string[],
  shape: protobuf.IConversionOptions,
  label: string,
): grpc.ServiceDefinition {
  const service = root.lookup(name);
  if (!(service instanceof protobuf.Service)) throw new ConfigError(`${label} defines no service ${name}`);
  const missing = methods.filter((method) => !Object.hasOwn(service.methods, method));
  if (missing.length > 0) throw new ConfigError(`${label}: service ${name} has no method ${missing.join(', ')}`);
  const definition: Record<string, grpc.MethodDefinition<object, object>> = {};
  for (const method of service.methodsArray) {
    // resolveAll() at parse resolved both types
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    definition[method.name] = {
      path: `/${name}/${method.name}`,
      requestStream: method.requestStream === true,
      responseStream: method.responseStream === true,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request, shape),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response, shape),
      // grpc-js also accepts a handler under this name (`predict` for `Predict`), as with proto-loader's definitions
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return definition as grpc.ServiceDefinition;
}

function serializer(type: protobuf.Type): (value: object) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`cannot serialize an array as ${type.name}`);
    // an answer that quotes a request's large text (its metadata) gets the text, not its stand-in
    const bytes = type.encode(type.fromObject(resolveHeldTexts(value as Record<string, unknown>))).finish();
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

/** A message of at least LARGE_TEXT_UNITS bytes is decoded with its large strings held apart (holding-reader.ts). */
function deserializer(type: protobuf.Type, shape: protobuf.IConversionOptions): (bytes: Buffer) => object {
  return (bytes) => {
    if (bytes.length < LARGE_TEXT_UNITS) return type.toObject(type.decode(bytes), shape);
    const reader = new HoldingReader(bytes);
    const message = type.toObject(type.decode(reader), shape);
    adoptHeldTexts(message, reader.held);
    return message;
  };
}
