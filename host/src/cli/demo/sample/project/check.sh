# check.sh: runs sum.sh on /sf/input/numbers.txt and compares with /sf/input/expected.txt.
got=$(sh /sf/program/sum.sh /sf/input/numbers.txt)
read -r want < /sf/input/expected.txt
if [ "$got" = "$want" ]; then echo ok; exit 0; fi
echo "wrong: $got (want $want)"
exit 1
