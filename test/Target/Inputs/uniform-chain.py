"""Prints a spec whose one uniform is a chain of N lets on a hyperparameter:
`chain` adds a level a let (u_i = u_{i-1} * 1.0001 + lr), `square` doubles
the written-out tree a let (u_i = u_{i-1} * u_{i-1})."""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
print("optimizer Chain {\n  hyper lr = 1e-3;\n  param p : f32;\n  grad g : f32;\n  update {")
print("    let u0 = lr + 1;")
for i in range(1, n + 1):
    rhs = f"u{i-1} * 1.0001 + lr" if kind == "chain" else f"u{i-1} * u{i-1}"
    print(f"    let u{i} = {rhs};")
print(f"    p = p - u{n} * g;\n  }}\n}}")
