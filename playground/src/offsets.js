// The checker's places are UTF-8 byte offsets; CodeMirror's are UTF-16 code
// units. These convert between the two for one text.

/** A function from a byte offset of `text` to its UTF-16 offset. */
export function byteOffsets(text) {
  // starts[i]: the byte offset where UTF-16 unit i starts (ascending).
  const starts = new Uint32Array(text.length + 1);
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    starts[i] = bytes;
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      starts[++i] = bytes; // the low surrogate has no bytes of its own
      bytes += 4;
    } else bytes += 3;
  }
  starts[text.length] = bytes;
  return (offset) => {
    // The first unit at or past `offset`.
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] < offset) lo = mid + 1; else hi = mid;
    }
    return lo;
  };
}

const encoder = new TextEncoder();

/** The UTF-8 byte offset of UTF-16 offset `pos` in `text`. */
export function utf16ToByte(text, pos) {
  return encoder.encode(text.slice(0, pos)).length;
}
