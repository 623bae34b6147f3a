#!/usr/bin/env bash
# Render the DVC plots page offline and look at it in a real headless browser (issue 14 item 4).
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
#   3. Debian's chromium (`apt-get install -y chromium`) opens it headless, dumps the rendered DOM
#      and takes a full-page screenshot: .plots_check/out/screenshot.png -- open it and look;
#   4. fails when a vega chart did not render (count of rendered <svg>/<canvas> charts smaller
#      than the count of vega specs) or an image plot is missing.
# Environment: DVC (default dvc), CHROMIUM (default chromium), WIDTH (default 1400),
#              HEIGHT (screenshot height in px; default: estimated from the number of plots).
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
URL="file://$PWD/$HTML"
H=${HEIGHT:-$(( 260 * (n_specs + n_imgs) + 800 ))}
FLAGS=(--headless --no-sandbox --disable-gpu --hide-scrollbars --allow-file-access-from-files
       --virtual-time-budget=20000)
"$CHROMIUM" "${FLAGS[@]}" --dump-dom "$URL" 2>/dev/null > "$OUT/rendered.html"
"$CHROMIUM" "${FLAGS[@]}" --window-size="${WIDTH:-1400},$H" --screenshot="$OUT/screenshot.png" \
  "$URL" 2>/dev/null >/dev/null

n_rendered=$(grep -o 'class="marks"' "$OUT/rendered.html" | wc -l)
missing=0
while read -r src; do
  [ -f "$OUT/$src" ] || { echo "plots_check: image plot missing: $src" >&2; missing=$((missing + 1)); }
done < <(grep -o '<img [^>]*src="[^"]*"' "$HTML" | sed -E 's/.*src="([^"]*)"/\1/')
echo "plots_check: $n_rendered of $n_specs vega charts rendered, $n_imgs image plots ($missing missing);" \
     "screenshot: $OUT/screenshot.png (${WIDTH:-1400}x$H)"
[ "$n_rendered" -ge "$n_specs" ] && [ "$missing" -eq 0 ]
