# tests/numbers.sh: what sum.sh prints for the numbers of /sf/input/numbers.txt.
sh /sf/program/sum.sh /sf/input/numbers.txt
