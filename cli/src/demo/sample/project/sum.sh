# sum.sh FILE: prints the sum of the numbers in FILE, one per line.
total=0
first=1
while read -r n; do
  # skip the header line
  if [ "$first" = 1 ]; then first=0; continue; fi
  total=$((total + n))
done < "$1"
echo "$total"
