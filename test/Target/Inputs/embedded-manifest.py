"""Prints a host library's embedded manifest (`<symbol>_manifest`, docs/abi.md)
and exits 1 unless it is, as JSON, the manifest written beside the library.

Usage: embedded-manifest.py LIBRARY MANIFEST
"""
import ctypes
import json
import sys

library, manifest_path = sys.argv[1], sys.argv[2]
with open(manifest_path) as f:
    manifest = json.load(f)
symbol = manifest["host"]["symbol"] + "_manifest"
text = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(ctypes.CDLL(library), symbol)))
print(symbol + ": " + text.decode())
if json.loads(text) != manifest:
    print("the embedded manifest is not the written one", file=sys.stderr)
    sys.exit(1)
