"""Print WordNet's `lexnames` file (NN<TAB>name<TAB>syntactic-category) from the lexnames(5WN)
man page, for NLTK's WordNet reader. Category: 1 noun, 2 verb, 3 adj, 4 adv."""
import gzip
import re
import sys

CAT = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
with gzip.open(sys.argv[1], "rt") as f:
    for line in f:
        m = re.match(r"^(\d\d)\t(\w+)\.(\w+)\s", line)
        if m:
            print(f"{m.group(1)}\t{m.group(2)}.{m.group(3)}\t{CAT[m.group(2)]}")
