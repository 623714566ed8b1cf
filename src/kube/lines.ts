// Splits a watch stream (newline-delimited JSON, chunked arbitrarily) into complete lines.

/** Splits a byte stream decoded as text into complete lines. */
export class LineSplitter {
  #buffer = '';

  /** Feeds a chunk; returns the complete non-empty lines it finished. */
  push(chunk: string): string[] {
    this.#buffer += chunk;
    const parts = this.#buffer.split('\n');
    this.#buffer = parts.pop() ?? '';
    return parts.map((p) => p.trim()).filter((p) => p !== '');
  }

  /** What is left after the stream ended (a final line without newline). */
  end(): string[] {
    const rest = this.#buffer.trim();
    this.#buffer = '';
    return rest === '' ? [] : [rest];
  }
}
