#!/usr/bin/env bash
# Every #include "room/..." of the project must point at the same room or at a
# room its row in harness/README.md allows (directly or through the rooms that
# one allows), and no source file is over 450 lines. Prints each violation
# with file and line; exit 1 if any.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
table="$root/harness/README.md"
declare -A uses=()
rooms=()
while IFS='|' read -r _ room _ may _; do
  room=$(echo "$room" | tr -d ' `')
  [[ "$room" == "room" || "$room" == ---* || -z "$room" ]] && continue
  may=$(echo "$may" | tr -d '` ' | sed 's/—//')
  rooms+=("$room"); uses[$room]=${may//,/ }
done < <(grep '^| `' "$table")
[ ${#rooms[@]} -ge 5 ] || { echo "arrows: could not read the rooms table in $table"; exit 1; }

room_of() {  # longest room that prefixes the path
  local best=""
  for r in "${rooms[@]}"; do
    [[ "$1" == "$r"/* && ${#r} -gt ${#best} ]] && best=$r
  done
  echo "$best"
}
declare -A reach=()
closure() {  # every room reachable from $1, itself included
  local seen=" $1 " todo=($1) r u
  while [ ${#todo[@]} -gt 0 ]; do
    r=${todo[0]}; todo=("${todo[@]:1}")
    for u in ${uses[$r]:-}; do
      [[ "$seen" == *" $u "* ]] || { seen+="$u "; todo+=("$u"); }
    done
  done
  echo "$seen"
}
for r in "${rooms[@]}"; do
  for u in ${uses[$r]}; do
    [[ " ${rooms[*]} " == *" $u "* ]] || { echo "arrows: $r may use '$u', which is not a room"; exit 1; }
  done
  reach[$r]=$(closure "$r")
done

bad=0 checked=0
cd "$root"
while IFS= read -r file; do
  from=$(room_of "$file")
  if [ -z "$from" ]; then
    # A folder of harness/ that is no row of the table is a room nobody checks.
    if [[ "$file" == harness/*/* && "$file" != harness/include/* ]]; then
      echo "$file: in no room of the table (add its row to harness/README.md)"
      bad=$((bad + 1))
    fi
    continue
  fi
  while IFS=: read -r line inc; do
    to=$(room_of "$inc")
    if [ -z "$to" ] && [[ "$inc" == harness/*/* && "$inc" != harness/include/* ]]; then
      echo "$file:$line: includes $inc, which is in no room of the table"
      bad=$((bad + 1))
      continue
    fi
    [ -n "$to" ] || continue
    checked=$((checked + 1))
    if [[ "${reach[$from]}" != *" $to "* ]]; then
      echo "$file:$line: $from includes $inc ($to), which its row does not allow"
      bad=$((bad + 1))
    fi
  done < <(grep -n '^#include "' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h' | sed 's#^\./##')
echo "arrows: $checked includes between rooms checked, $bad against the table"

# No source file over 450 lines (tests, tools and plugins included): a file
# that grows past it is split along what it does.
long=0 files=0
while IFS= read -r file; do
  files=$((files + 1))
  n=$(wc -l < "$file")
  if [ "$n" -gt 450 ]; then
    echo "$file: $n lines, above 450"
    long=$((long + 1))
  fi
done < <(git ls-files '*.cc' '*.h' '*.cpp' '*.c' '*.cu' 2>/dev/null || find . \( -name '*.cc' -o -name '*.h' \) -not -path './build/*' | sed 's#^\./##')
echo "arrows: $files source files checked, $long above 450 lines"

# The command-line room's functions are at most 60 lines each.
fn=0
python3 "$root/tests/function_length.py" 60 harness/cli/*.cc || fn=1
# The rooms that do the work print nothing: they emit events
# (harness/report/events.h), and the sinks decide what the user sees.
prints=$(grep -nE '\b(printf|fprintf|fputs|puts|fwrite)\(|fmt::print\(|std::(cout|cerr)\b' \
  properties/*.cc properties/*.h harness/run/*.cc harness/run/*.h harness/soak/*.cc harness/soak/*.h || true)
np=0
if [ -n "$prints" ]; then
  echo "$prints" | sed 's/$/  <- a print in a room that emits events/'
  np=$(echo "$prints" | wc -l)
fi
echo "arrows: $np print calls in properties/, harness/run/, harness/soak/"
[ $bad -eq 0 ] && [ $long -eq 0 ] && [ $fn -eq 0 ] && [ "$np" -eq 0 ]
