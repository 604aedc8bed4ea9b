"""Rewrites the generated tables of ../src/rm.rs (CONTROLS_580 and
CLASSES_580) from probe.sh's output on standard input; the hand-written
CONTROL_LISTS_580 between them stays."""
import re
import sys

caps = {"cu": "CU", "video": "Caps::VIDEO", "graphics": "Caps::GRAPHICS"}
rows = [l.split() for l in sys.stdin if l.startswith(("ctl ", "cls "))]
ctl = [f'    ({int(w[2], 16):#010x}, "{w[1]}", {w[3]}, {caps[w[4]]}),' for w in rows if w[0] == "ctl"]
cls = [f'    ({int(w[2], 16):#06x}, "{w[1]}", {w[3]}, {caps[w[4]]}),' for w in rows if w[0] == "cls"]
path = __file__.rsplit("/", 2)[0] + "/src/rm.rs"
src = open(path).read()
def splice(src, name, body):
    pat = re.compile(r"(pub const " + name + r": [^=]+= &\[\n).*?(\n\];)", re.S)
    return pat.sub(lambda m: m.group(1) + "\n".join(body) + m.group(2), src, count=1)
src = splice(src, "CONTROLS_580", ctl)
src = splice(src, "CLASSES_580", cls)
open(path, "w").write(src)
print(f"{len(ctl)} controls, {len(cls)} classes", file=sys.stderr)
