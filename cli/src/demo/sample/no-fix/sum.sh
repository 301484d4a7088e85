# sum.sh FILE: prints the sum of the numbers in FILE, one per line.
total=0
prev=
while read -r n; do
  if [ -n "$prev" ]; then total=$((total + prev)); fi
  prev=$n
done < "$1"
echo "$total"
