// A shareable link: the program in the URL's fragment (never sent to a server).
// `z=` is the text deflated (CompressionStream) then base64url; `code=` is the
// text as base64url, read too (for links written by hand or by tools).

function toBase64Url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const s = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

async function through(stream, bytes) {
  const out = new Response(new Blob([bytes]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

/** The fragment (without `#`) that carries `text`. */
export async function encodeShared(text) {
  const bytes = new TextEncoder().encode(text);
  if (typeof CompressionStream === "function") {
    return `z=${toBase64Url(await through(new CompressionStream("deflate-raw"), bytes))}`;
  }
  return `code=${toBase64Url(bytes)}`;
}

/** The text a fragment carries, or null when it carries none (or cannot be read). */
export async function decodeShared(fragment) {
  const params = new URLSearchParams(fragment);
  try {
    if (params.has("z")) {
      const bytes = await through(new DecompressionStream("deflate-raw"), fromBase64Url(params.get("z")));
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    }
    if (params.has("code")) return new TextDecoder("utf-8", { fatal: true }).decode(fromBase64Url(params.get("code")));
  } catch {
    return null;
  }
  return null;
}
