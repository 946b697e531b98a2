/** What the API was asked to do, for metrics and the audit log (the HTTP front end names it from the route). */
export type OperationName =
  | 'list_servers'
  | 'health'
  | 'list_tools'
  | 'call_tool'
  | 'list_prompts'
  | 'get_prompt'
  | 'list_resources'
  | 'read_resource'
  | 'list_resource_templates'
  | 'subscribe_resource'
  | 'unsubscribe_resource'
  | 'set_logging_level'
  | 'metrics'
  | 'mcp'
  | 'unknown_route';

export interface ApiOperation {
  operation: OperationName;
  /** The server it was about; null for operations over every server (and unknown routes). */
  server: string | null;
  /** The tool or prompt name, or the resource URI; null when the operation has none. */
  name: string | null;
  /** A tool's arguments or a prompt's; only the audit log with include_arguments writes them. */
  arguments?: unknown;
}
