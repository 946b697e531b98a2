import type * as grpc from '@grpc/grpc-js';
import { fromJSON, type Options, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { ConfigError } from '../../encoder/errors.ts';

/**
 * Turns the text of a .proto file into a proto-loader package definition without touching the file system:
 * the single executable carries the text (a SEA asset or a constant), never a path that `loadSync` could read.
 * `label` names the text in errors.
 */
export function packageDefinitionFromText(protoText: string, options: Options, label: string): PackageDefinition {
  try {
    // keepCase must be decided at parse time: the parsed names are what the definition and its descriptors carry.
    const { root } = protobuf.parse(protoText, { keepCase: options.keepCase ?? false });
    return fromJSON(root.toJSON() as Parameters<typeof fromJSON>[0], options);
  } catch (error) {
    throw new ConfigError(`${label} is not a usable .proto text: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** The service `name` of a package definition, with every one of `methods`; ConfigError when the text lacks one. */
export function serviceDefinition(
  definition: PackageDefinition,
  name: string,
  methods: readonly string[],
  label: string,
): grpc.ServiceDefinition {
  const service = definition[name];
  // Message and enum definitions carry a `format`; services are plain method maps.
  if (service === undefined || 'format' in service) throw new ConfigError(`${label} defines no service ${name}`);
  const missing = methods.filter((method) => !(method in service));
  if (missing.length > 0) throw new ConfigError(`${label}: service ${name} has no method ${missing.join(', ')}`);
  return service as unknown as grpc.ServiceDefinition;
}
