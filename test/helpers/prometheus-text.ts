/** The value of one series (`name{labels}` exactly as exposed) in Prometheus' text format, or undefined when absent. */
export function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((each) => each.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
