"""Prints a PTX module's embedded manifest (the byte array `<entry>_manifest`,
docs/abi.md) as text and exits 1 unless it is NUL-terminated compact JSON
equal to the manifest given (the one written beside the PTX) less its
"binaries" (where the files are, which the PTX does not depend on).

Usage: ptx-manifest.py PTX MANIFEST
"""
import json
import re
import sys

ptx_path, manifest_path = sys.argv[1], sys.argv[2]
with open(manifest_path) as f:
    manifest = json.load(f)
manifest.pop("binaries", None)
symbol = manifest.get("entry", manifest["kernel"]) + "_manifest"
with open(ptx_path) as f:
    ptx = f.read()
found = re.findall(r"\.b8 " + re.escape(symbol) + r"\[(\d+)\] = \{([^}]*)\};", ptx)
if len(found) != 1:
    sys.exit(f"{ptx_path}: {len(found)} declarations of {symbol}, expected 1")
size, values = found[0]
data = bytes(int(v) for v in values.split(","))
# NVPTX leaves the trailing zeros (the NUL) to the array's size.
data += bytes(int(size) - len(data))
if len(data) != int(size) or data[-1] != 0 or 0 in data[:-1]:
    sys.exit(f"{symbol}: {len(data)} bytes of [{size}], not one NUL-terminated text")
text = data[:-1].decode()
print(symbol + ": " + text)
if json.loads(text) != manifest:
    sys.exit("the embedded manifest is not the written one")
# Compact: no line breaks or spaces after separators (numbers are printed
# as LLVM prints them, so the text is not Python's).
if re.search(r'\n|": |, "', text):
    sys.exit("the embedded manifest is not compact JSON")
