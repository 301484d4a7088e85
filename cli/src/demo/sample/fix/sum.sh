# sum.sh FILE: prints the sum of the numbers in FILE, one per line.
total=0
while read -r n; do
  total=$((total + n))
done < "$1"
echo "$total"
