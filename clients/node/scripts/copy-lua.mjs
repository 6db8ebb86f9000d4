// Copies the Go module's Lua files and their manifest into dist/lua: the
// scripts have one source (internal/scripts), which the package carries.
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";

const src = new URL("../../../internal/scripts/", import.meta.url);
const dst = new URL("../dist/lua/", import.meta.url);
mkdirSync(dst, { recursive: true });
for (const f of readdirSync(src)) {
  if (f.endsWith(".lua") || f === "manifest.json") copyFileSync(new URL(f, src), new URL(f, dst));
}
