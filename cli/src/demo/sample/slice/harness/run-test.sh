# run-test.sh TEST: runs the test TEST of the tree under test (the Slice lays its tests over
# both the base and the Candidate, so no Candidate decides what they are).
cd /sf/program || exit 2
exec sh "tests/$1"
