#!/usr/bin/env bash
# Render the DVC plots page offline and look at it in a real headless browser.
#
# usage (from the repository root, with the project's venv active):
#   scripts/plots_check.sh                       # dvc plots show
#   scripts/plots_check.sh diff main             # dvc plots diff main (compare with a branch)
#
# What it does:
#   1. `dvc plots <show|diff ...> -o .plots_check/out` (top-level plots of dvc.yaml + image plots);
#   2. DVC's index.html loads vega, vega-lite and vega-embed from a CDN: the script tags are
#      rewritten to local copies (npm packages installed once into .plots_check/node_modules,
#      git-ignored; needs the npm registry the first time), so the page works offline;
#   3. Debian's chromium (`apt-get install -y chromium`) opens it headless; a script added to
#      the page reports the laid-out page's full width and height, every chart's and image's
#      box and any image that failed to load; the screenshot is then taken at exactly that
#      size: .plots_check/out/screenshot.png is the whole page -- open it and look;
#   4. fails when a vega chart did not render (count of rendered charts smaller than the count
#      of vega specs), an image plot is missing or failed to load, or a chart / image lies
#      outside the screenshot (its own PNG size).
# Environment: DVC (default dvc), CHROMIUM (default chromium), WIDTH (minimum page width,
#              default 1400; a wider page is shot at its own width).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
DVC=${DVC:-dvc}
CHROMIUM=${CHROMIUM:-chromium}
WORK=.plots_check
OUT=$WORK/out
NM=$WORK/node_modules

command -v "$CHROMIUM" >/dev/null || { echo "plots_check: no $CHROMIUM (apt-get install -y chromium)" >&2; exit 2; }
if [ ! -f "$NM/vega/build/vega.min.js" ] || [ ! -f "$NM/vega-lite/build/vega-lite.min.js" ] \
   || [ ! -f "$NM/vega-embed/build/vega-embed.min.js" ]; then
  mkdir -p "$WORK"
  (cd "$WORK" && npm install --no-audit --no-fund --silent vega@5 vega-lite@5 vega-embed@6)
fi

rm -rf "$OUT"
if [ "${1:-}" = diff ]; then shift; "$DVC" plots diff "$@" -o "$OUT" >/dev/null
else "$DVC" plots show "$@" -o "$OUT" >/dev/null; fi
HTML=$OUT/index.html
mkdir -p "$OUT/vendor"
for p in vega vega-lite vega-embed; do cp "$NM/$p/build/$p.min.js" "$OUT/vendor/"; done
sed -i -E \
  -e 's#https://cdn\.jsdelivr\.net/npm/vega@[^"]*#vendor/vega.min.js#' \
  -e 's#https://cdn\.jsdelivr\.net/npm/vega-lite@[^"]*#vendor/vega-lite.min.js#' \
  -e 's#https://cdn\.jsdelivr\.net/npm/vega-embed@[^"]*#vendor/vega-embed.min.js#' "$HTML"
if grep -q 'cdn\.jsdelivr' "$HTML"; then echo "plots_check: a CDN reference is left in $HTML" >&2; exit 1; fi

n_specs=$(grep -c 'vegaEmbed(' "$HTML" || true)
n_imgs=$(grep -o '<img [^>]*src="[^"]*"' "$HTML" | wc -l)
# measure the rendered page: a script appended to the page writes, once the charts
# had time to render, the page's full size, every chart's and image's box and the images that
# failed to load into <pre id="plots-check">; the DOM dump carries it out of the browser
cat >> "$HTML" <<'JS'
<script>
setTimeout(function () {
  var d = document.documentElement, boxes = [], broken = [];
  document.querySelectorAll('.vega-embed, img').forEach(function (e) {
    var r = e.getBoundingClientRect();
    boxes.push([e.tagName, Math.round(r.left + scrollX), Math.round(r.top + scrollY),
                Math.round(r.right + scrollX), Math.round(r.bottom + scrollY)]);
    if (e.tagName === 'IMG' && (!e.complete || e.naturalWidth === 0)) broken.push(e.src);
  });
  var pre = document.createElement('pre'); pre.id = 'plots-check';
  pre.textContent = JSON.stringify({w: Math.max(d.scrollWidth, document.body.scrollWidth),
    h: Math.max(d.scrollHeight, document.body.scrollHeight), boxes: boxes, broken: broken});
  document.body.appendChild(pre);
}, 15000);
</script>
JS
URL="file://$PWD/$HTML"
FLAGS=(--headless --no-sandbox --disable-gpu --hide-scrollbars --allow-file-access-from-files
       --virtual-time-budget=30000)
W0=${WIDTH:-1400}
"$CHROMIUM" "${FLAGS[@]}" --window-size="$W0,1000" --dump-dom "$URL" 2>/dev/null > "$OUT/rendered.html"
MEASURE=$(python3 - "$OUT/rendered.html" <<'PY'
import html, json, re, sys
t = open(sys.argv[1], encoding="utf-8", errors="replace").read()
m = re.search(r'<pre id="plots-check">(.*?)</pre>', t, re.S)
print(json.dumps(json.loads(html.unescape(m.group(1))) if m else {}))
PY
)
[ "$MEASURE" != "{}" ] || { echo "plots_check: the page did not report its size (did it load?)" >&2; exit 1; }
# the page's extent: its scroll size, or the farthest chart / image edge where one overflows
read -r W H < <(python3 -c "import json,sys; m=json.loads(sys.argv[1]); b=m['boxes'] or [[0]*5]
print(max([m['w'], $W0] + [x[3] + 16 for x in b]), max([m['h']] + [x[4] + 16 for x in b]))" "$MEASURE")
# the screenshot is the whole page, at the width and height the browser laid it out
"$CHROMIUM" "${FLAGS[@]}" --window-size="$W,$H" --screenshot="$OUT/screenshot.png" \
  "$URL" 2>/dev/null >/dev/null

n_rendered=$(grep -o 'class="marks"' "$OUT/rendered.html" | wc -l)
missing=0
while read -r src; do
  [ -f "$OUT/$src" ] || { echo "plots_check: image plot missing: $src" >&2; missing=$((missing + 1)); }
done < <(grep -o '<img [^>]*src="[^"]*"' "$HTML" | sed -E 's/.*src="([^"]*)"/\1/')
outside=$(python3 - "$MEASURE" "$OUT/screenshot.png" <<'PY'
import json, struct, sys
m = json.loads(sys.argv[1])
with open(sys.argv[2], "rb") as f:          # the PNG's own size (IHDR)
    f.read(16)
    pw, ph = struct.unpack(">II", f.read(8))
bad = [b for b in m["boxes"] if b[3] > pw or b[4] > ph or b[1] < 0 or b[2] < 0]
for b in bad:
    print(f"plots_check: {b[0]} at x {b[1]}-{b[3]}, y {b[2]}-{b[4]} is outside the "
          f"{pw}x{ph} screenshot", file=sys.stderr)
for s in m["broken"]:
    print(f"plots_check: image failed to load: {s}", file=sys.stderr)
print(len(bad) + len(m["broken"]))
PY
)
echo "plots_check: $n_rendered of $n_specs vega charts rendered, $n_imgs image plots ($missing missing," \
     "$outside outside the shot or not loaded); screenshot: $OUT/screenshot.png (${W}x$H, the full page)"
[ "$n_rendered" -ge "$n_specs" ] && [ "$missing" -eq 0 ] && [ "$outside" -eq 0 ]
