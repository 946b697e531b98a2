import type * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
// @grpc/reflection's ReflectionService.addToServer loads reflection.proto from the package's folder, which a
// bundled single executable does not have. Its ReflectionV1Implementation (the package pins 1.0.4; no
// "exports" map) answers requests without reading files; the service is registered here from the text below.
import type { ReflectionV1Implementation } from '@grpc/reflection/build/src/implementations/reflection-v1.js';
import type { ServerReflectionRequest } from '@grpc/reflection/build/src/generated/grpc/reflection/v1/ServerReflectionRequest.js';
import type { ServerReflectionResponse } from '@grpc/reflection/build/src/generated/grpc/reflection/v1/ServerReflectionResponse.js';
import { grpcServiceDefinition, parseProtoText } from './proto-text.ts';

const REFLECTION_VERSIONS = ['v1', 'v1alpha'] as const;

/** Both published versions: grpcurl asks v1 first, older tools (grpc_cli, Postman) only know v1alpha. */
export const REFLECTION_SERVICE_NAMES = REFLECTION_VERSIONS.map((version) => `grpc.reflection.${version}.ServerReflection`);

/**
 * grpc/reflection/<version>/reflection.proto (as shipped in @grpc/reflection 1.0.4) without its comments and
 * language options; v1 and v1alpha differ only in their package.
 */
function reflectionProto(version: (typeof REFLECTION_VERSIONS)[number]): string {
  return `syntax = "proto3";
package grpc.reflection.${version};
service ServerReflection {
  rpc ServerReflectionInfo(stream ServerReflectionRequest) returns (stream ServerReflectionResponse);
}
message ServerReflectionRequest {
  string host = 1;
  oneof message_request {
    string file_by_filename = 3;
    string file_containing_symbol = 4;
    ExtensionRequest file_containing_extension = 5;
    string all_extension_numbers_of_type = 6;
    string list_services = 7;
  }
}
message ExtensionRequest {
  string containing_type = 1;
  int32 extension_number = 2;
}
message ServerReflectionResponse {
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {
    FileDescriptorResponse file_descriptor_response = 4;
    ExtensionNumberResponse all_extension_numbers_response = 5;
    ListServiceResponse list_services_response = 6;
    ErrorResponse error_response = 7;
  }
}
message FileDescriptorResponse {
  repeated bytes file_descriptor_proto = 1;
}
message ExtensionNumberResponse {
  string base_type_name = 1;
  repeated int32 extension_number = 2;
}
message ListServiceResponse {
  repeated ServiceResponse service = 1;
}
message ServiceResponse {
  string name = 1;
}
message ErrorResponse {
  int32 error_code = 1;
  string error_message = 2;
}
`;
}

/**
 * The messages as @grpc/reflection's implementation expects them (its PROTO_LOADER_OPTS, with camelCase field names:
 * the text is parsed without keepCase for the service).
 */
const REFLECTION_MESSAGE_SHAPE = { longs: String, enums: String, bytes: Array, defaults: true, oneofs: true } as const;

/**
 * Adds grpc.reflection.v1 and v1alpha ServerReflection to `server`. `described` are the protos (parsed with their
 * fields' own names) whose files reflection hands out (by symbol or file name); `listed` are the service names
 * list_services answers. Its own files are described too, with their fields' own names, so that a reflection client
 * sees snake_case fields as in any other server. Descriptors are handed out as protoc would write them
 * (descriptors.ts), which grpcurl needs for map fields. They are built at the first reflection call, with
 * proto-loader: building them took ~60 ms of every start, for a service that few clients use.
 */
export function addReflection(server: grpc.Server, described: readonly protobuf.Root[], listed: readonly string[]): void {
  let built: Promise<ReflectionV1Implementation> | undefined;
  const reflection = () =>
    (built ??= Promise.all([import('@grpc/reflection/build/src/implementations/reflection-v1.js'), import('./descriptors.ts')]).then(
      ([{ ReflectionV1Implementation }, { reflectedDefinition }]) => {
        const own = REFLECTION_VERSIONS.map((version) => parseProtoText(reflectionProto(version), `the reflection ${version} proto`));
        return new ReflectionV1Implementation(reflectedDefinition([...described, ...own]), { services: [...listed] });
      },
    ));

  for (const version of REFLECTION_VERSIONS) {
    const label = `the reflection ${version} proto`;
    const proto = parseProtoText(reflectionProto(version), label, false);
    const service = grpcServiceDefinition(proto, `grpc.reflection.${version}.ServerReflection`, ['ServerReflectionInfo'], REFLECTION_MESSAGE_SHAPE, label);
    const info: grpc.handleBidiStreamingCall<ServerReflectionRequest, ServerReflectionResponse> = (stream) => {
      // Callbacks on one promise run in the order they were added: answers keep the order of the requests, and the
      // stream ends after the last of them.
      const fail = (error: unknown) => stream.destroy(error instanceof Error ? error : new Error(String(error)));
      stream.on('data', (request: ServerReflectionRequest) => {
        reflection().then((implementation) => stream.write(implementation.handleServerReflectionRequest(request)), fail);
      });
      stream.on('end', () => {
        reflection().then(() => stream.end(), fail);
      });
    };
    server.addService(service, { ServerReflectionInfo: info });
  }
}
