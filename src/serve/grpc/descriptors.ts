import { fromJSON, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import descriptorJson from 'protobufjs/google/protobuf/descriptor.json' with { type: 'json' };

/**
 * The file descriptors proto-loader derives from a parsed .proto (protobufjs `toDescriptor`) differ from what
 * protoc writes in ways that break reflection clients: grpcurl refuses a map field whose entry message is not
 * named `<FieldName>Entry` ("is an invalid map: incorrect implicit map entry name", fullstorydev/grpcurl#519),
 * type references are relative (`TokenInfo`, not `.encoder.TokenInfo`), proto3 `optional` fields lack the
 * proto3_optional flag, so they read as a oneof, json_name is missing, and a file that uses another file's types
 * (encoderfile's packages use `encoderfile.token.TokenInfo`) does not list it as a dependency, without which a
 * reflection client cannot resolve them. `protocLikeDefinition` rewrites the descriptors the way protoc would write
 * them; the messages and their wire format are untouched.
 */

const descriptorTypes = protobuf.Root.fromJSON(descriptorJson as protobuf.INamespace);
const FileDescriptorProto = descriptorTypes.lookupType('google.protobuf.FileDescriptorProto');

interface FieldDescriptor {
  name: string;
  typeName?: string;
  jsonName?: string;
  oneofIndex?: number;
  proto3Optional?: boolean;
}

interface MessageDescriptor {
  name: string;
  field?: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
  enumType?: { name: string }[];
  oneofDecl?: { name: string }[];
  options?: { mapEntry?: boolean };
}

interface FileDescriptor {
  name?: string;
  package?: string;
  dependency?: string[];
  messageType?: MessageDescriptor[];
  enumType?: { name: string }[];
  service?: { method?: { inputType?: string; outputType?: string }[] }[];
}

/**
 * What server reflection hands out about `protos` (parsed with their fields' own names): one package definition of
 * every symbol, each with the file descriptors of all of them, as protoc would write them. Loaded only for
 * reflection's first call (reflection.ts).
 */
export function reflectedDefinition(protos: readonly protobuf.Root[]): PackageDefinition {
  return Object.assign({}, ...protos.map((proto) => protocLikeDefinition(fromJSON(proto.toJSON() as Parameters<typeof fromJSON>[0]))));
}

/** `definition` with every entry's file descriptors rewritten as protoc would write them (see above). */
function protocLikeDefinition(definition: PackageDefinition): PackageDefinition {
  const rewritten = new Map<readonly Buffer[], Buffer[]>();
  const result: PackageDefinition = {};
  for (const [name, entry] of Object.entries(definition)) {
    if (!('fileDescriptorProtos' in entry) || !Array.isArray(entry.fileDescriptorProtos)) {
      result[name] = entry;
      continue;
    }
    // proto-loader gives every entry the same array of all files: rewrite it once.
    let files = rewritten.get(entry.fileDescriptorProtos);
    if (files === undefined) {
      files = protocLikeFiles(entry.fileDescriptorProtos);
      rewritten.set(entry.fileDescriptorProtos, files);
    }
    result[name] = { ...entry, fileDescriptorProtos: files } as typeof entry;
  }
  return result;
}

function protocLikeFiles(encoded: readonly Buffer[]): Buffer[] {
  const files = encoded.map((bytes) => FileDescriptorProto.toObject(FileDescriptorProto.decode(bytes)) as FileDescriptor);
  // every type's full name, and the file that declares it
  const fileOfType = new Map<string, string>();
  for (const file of files) {
    const scope = file.package ? `.${file.package}` : '';
    const names = new Set<string>();
    for (const enumType of file.enumType ?? []) names.add(`${scope}.${enumType.name}`);
    for (const message of file.messageType ?? []) collectTypeNames(message, scope, names);
    for (const name of names) fileOfType.set(name, file.name ?? '');
  }
  const typeNames = new Set(fileOfType.keys());
  return files.map((file) => {
    const scope = file.package ? `.${file.package}` : '';
    const used = new Set<string>();
    for (const message of file.messageType ?? []) rewriteMessage(message, scope, typeNames, used);
    for (const method of (file.service ?? []).flatMap((service) => service.method ?? [])) {
      if (method.inputType) used.add((method.inputType = qualified(method.inputType, [scope], typeNames)));
      if (method.outputType) used.add((method.outputType = qualified(method.outputType, [scope], typeNames)));
    }
    const dependencies = new Set([...used].map((name) => fileOfType.get(name)).filter((name) => name !== undefined && name !== file.name));
    if (dependencies.size > 0) file.dependency = [...dependencies] as string[];
    return Buffer.from(FileDescriptorProto.encode(FileDescriptorProto.fromObject(file)).finish());
  });
}

function collectTypeNames(message: MessageDescriptor, scope: string, names: Set<string>): void {
  const fullName = `${scope}.${message.name}`;
  names.add(fullName);
  for (const enumType of message.enumType ?? []) names.add(`${fullName}.${enumType.name}`);
  for (const nested of message.nestedType ?? []) collectTypeNames(nested, fullName, names);
}

/** Qualifies `message`'s type references (adding each to `used`), names its map entries and flags its optional fields. */
function rewriteMessage(message: MessageDescriptor, scope: string, typeNames: Set<string>, used: Set<string>): void {
  const fullName = `${scope}.${message.name}`;
  // Enclosing scopes, innermost first: protobuf's rule for resolving a relative type name.
  const scopes = fullName.split('.').map((_, i, parts) => parts.slice(0, parts.length - i).join('.'));
  const fields = message.field ?? [];
  for (const field of fields) {
    if (field.typeName) used.add((field.typeName = qualified(field.typeName, scopes, typeNames)));
    field.jsonName ??= jsonName(field.name);
  }
  for (const nested of message.nestedType ?? []) {
    if (!nested.options?.mapEntry) continue;
    const field = fields.find((f) => f.typeName === `${fullName}.${nested.name}`);
    if (field === undefined) continue;
    nested.name = mapEntryName(field.name);
    field.typeName = `${fullName}.${nested.name}`;
  }
  // protoc names the synthetic oneof of a proto3 `optional` field `_<field>`, with that field alone in it.
  (message.oneofDecl ?? []).forEach((oneof, index) => {
    const members = fields.filter((f) => f.oneofIndex === index);
    if (members.length === 1 && oneof.name === `_${members[0].name}`) members[0].proto3Optional = true;
  });
  for (const nested of message.nestedType ?? []) rewriteMessage(nested, fullName, typeNames, used);
}

function qualified(typeName: string, scopes: readonly string[], typeNames: Set<string>): string {
  if (typeName.startsWith('.')) return typeName;
  return scopes.map((scope) => `${scope}.${typeName}`).find((candidate) => typeNames.has(candidate)) ?? `.${typeName}`;
}

/** protoc's json_name: `token_info` → `tokenInfo` (what grpcurl prints; it accepts both names in requests). */
function jsonName(fieldName: string): string {
  return fieldName.replace(/_([a-z]?)/g, (_, letter: string) => letter.toUpperCase());
}

/** protoc's name for the entry message of a map field: `id2label` → `Id2labelEntry`, `label_map` → `LabelMapEntry`. */
function mapEntryName(fieldName: string): string {
  return `${fieldName.replace(/(?:^|_)([a-z]?)/g, (_, letter: string) => letter.toUpperCase())}Entry`;
}
