#!/usr/bin/env python3
"""Reports the longest C++ functions and files under the given folders.

Usage: scripts/check-sizes.py [--max-function N] [--max-file N] [--top K]
                              [PATH ...]          (default: lib)

A function is a brace block at namespace or class scope whose header has a
parameter list (lambdas and blocks inside a function count toward it). Its
length is the lines from the header's first line to the closing brace. The
scan is a heuristic on the text, after comments, string and character
literals are blanked out; it needs no compiler. Prints the K longest
functions and files, then every one over its limit; exits 1 if there is any.
"""

import argparse
import os
import re
import sys

EXTENSIONS = ('.cpp', '.h', '.cc', '.hpp')
CONTAINERS = re.compile(r'\b(namespace|class|struct|union|enum)\b')
CONTROL = re.compile(r'^\s*(if|for|while|switch|catch|do|else|return)\b')


def blank(text):
    """`text` with comments and literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = ')' + (m.group(1) if m else '') + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    # Preprocessor lines (with their continuations) say nothing of scopes.
    return re.sub(r'(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*',
                  lambda m: re.sub(r'[^\n]', ' ', m.group(0)), ''.join(out))


def functions(path):
    """Yields (name, first line, last line) for each function in `path`."""
    with open(path, encoding='utf-8', errors='replace') as f:
        text = blank(f.read())
    # The scope stack: 'file', 'container', 'function' or 'block'.
    stack = ['file']
    header_start = 0  # offset of the text since the last ; { } at this level
    opened = []       # (kind, name, offset of its header) per open brace
    for i, c in enumerate(text):
        if c == '{':
            header = text[header_start:i]
            kind = 'block'
            name = ''
            if stack[-1] in ('file', 'container'):
                stripped = header.strip()
                if CONTAINERS.search(stripped.split('(')[0]) or \
                        stripped.startswith('extern'):
                    kind = 'container'
                elif '(' in stripped and not CONTROL.match(stripped) and \
                        not re.search(r'=\s*$', stripped):
                    kind = 'function'
                    m = re.search(r'([~\w:<>]+)\s*\(', stripped)
                    name = m.group(1) if m else stripped[:40]
            # The header begins at its first non-blank character.
            start = header_start + (len(header) - len(header.lstrip()))
            opened.append((kind, name, start))
            stack.append(kind)
            header_start = i + 1
        elif c == '}':
            if len(stack) > 1:
                kind, name, start = opened.pop()
                stack.pop()
                if kind == 'function':
                    first = text.count('\n', 0, start) + 1
                    last = text.count('\n', 0, i) + 1
                    yield name, first, last
            header_start = i + 1
        elif c == ';' and stack[-1] in ('file', 'container'):
            header_start = i + 1
        elif c == ':' and stack[-1] == 'container' and \
                re.search(r'\b(public|private|protected)\s*$',
                          text[header_start:i]):
            header_start = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('paths', nargs='*', default=['lib'])
    parser.add_argument('--max-function', type=int, default=150)
    parser.add_argument('--max-file', type=int, default=800)
    parser.add_argument('--top', type=int, default=10)
    args = parser.parse_args()

    files, funcs = [], []
    for root in args.paths:
        walk = [(root, [], [root])] if os.path.isfile(root) else os.walk(root)
        for folder, _, names in walk:
            for name in sorted(names):
                path = name if os.path.isfile(root) else os.path.join(folder,
                                                                      name)
                if not path.endswith(EXTENSIONS):
                    continue
                with open(path, encoding='utf-8', errors='replace') as f:
                    files.append((sum(1 for _ in f), path))
                for fname, first, last in functions(path):
                    funcs.append((last - first + 1, f'{path}:{first}', fname))

    funcs.sort(reverse=True)
    files.sort(reverse=True)
    print(f'longest functions ({len(funcs)} scanned):')
    for length, where, name in funcs[:args.top]:
        print(f'  {length:5d}  {name}  ({where})')
    print(f'longest files ({len(files)} scanned):')
    for length, path in files[:args.top]:
        print(f'  {length:5d}  {path}')
    over = [f for f in funcs if f[0] > args.max_function]
    big = [f for f in files if f[0] > args.max_file]
    for length, where, name in over:
        print(f'function over {args.max_function} lines: {name} ({where}, '
              f'{length} lines)', file=sys.stderr)
    for length, path in big:
        print(f'file over {args.max_file} lines: {path} ({length} lines)',
              file=sys.stderr)
    return 1 if over or big else 0


if __name__ == '__main__':
    sys.exit(main())
