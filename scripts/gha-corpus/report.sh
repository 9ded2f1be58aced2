#!/usr/bin/env bash
# report.sh validates a corpus of real GitHub Actions workflow files with `gantry validate`
# and prints, as Markdown, how many Gantry accepts and why it refuses the rest.
#
# The corpus is repos.tsv beside this script: one repository a line, the commit it is
# pinned at, and the workflow files read from it. The files themselves are never committed;
# they are read from git at the pinned commit.
#
#   scripts/gha-corpus/report.sh                       # clones into a cache dir
#   scripts/gha-corpus/report.sh --mirrors /work/.mirror
#   scripts/gha-corpus/report.sh --keep /tmp/corpus    # keeps the extracted files
#
# Options:
#   --mirrors DIR  read existing clones, bare or not, from DIR instead of cloning: the
#                  first of DIR/owner+name/repo (the layout of the fetch tool),
#                  DIR/owner+name, DIR/owner+name.git, DIR/owner/name, DIR/owner/name.git
#                  that exists is used
#   --cache DIR    where repositories are cloned when --mirrors is not given
#                  (default: ${XDG_CACHE_HOME:-~/.cache}/gantry-gha-corpus)
#   --list FILE    the corpus (default: repos.tsv beside this script)
#   --gantry BIN   the gantry binary (default: bin/gantry, built first with `make build`)
#   --no-build     do not run `make build`
#   --keep DIR     extract the workflow files into DIR and keep them there
#   --raw FILE     also write every error as TSV (file, line, column, code, path, message)
#   --reuse        with --keep DIR, print the report again from the results kept in DIR
#                  by an earlier run, without extracting or validating anything
#
# Exit status: 0 when the report was written, whatever it says; 1 when the corpus could
# not be read (a repository or commit missing) or gantry could not be run.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
root=$(cd -- "$here/../.." && pwd)

mirrors="" cache="${XDG_CACHE_HOME:-$HOME/.cache}/gantry-gha-corpus" list="$here/repos.tsv"
gantry="" build=1 keep="" raw="" reuse=0
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
	case $1 in
	--mirrors) mirrors=${2:?--mirrors needs a directory}; shift 2 ;;
	--cache) cache=${2:?--cache needs a directory}; shift 2 ;;
	--list) list=${2:?--list needs a file}; shift 2 ;;
	--gantry) gantry=${2:?--gantry needs a binary}; build=0; shift 2 ;;
	--no-build) build=0; shift ;;
	--keep) keep=${2:?--keep needs a directory}; shift 2 ;;
	--raw) raw=${2:?--raw needs a file}; shift 2 ;;
	--reuse) reuse=1 build=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "report.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
command -v jq >/dev/null || { echo "report.sh: needs jq" >&2; exit 1; }
if [[ $reuse == 1 && ! -s ${keep:-/nonexistent}/results.tsv ]]; then
	echo "report.sh: --reuse needs --keep DIR of an earlier run" >&2
	exit 2
fi

if [[ -z $gantry ]]; then
	gantry=$root/bin/gantry
	if [[ $build == 1 ]]; then
		make -C "$root" build >&2
	fi
fi
[[ -x $gantry ]] || { echo "report.sh: $gantry is not an executable (make build?)" >&2; exit 1; }

if [[ -n $keep ]]; then
	work=$keep
	mkdir -p "$work"
else
	work=$(mktemp -d)
	trap 'rm -rf -- "$work"' EXIT
fi
files=$work/files

# gitdir prints the git directory of repo (owner/name) at its pinned commit, cloning or
# fetching it into the cache when no --mirrors were given.
gitdir() {
	local repo=$1 commit=$2 flat=${1/\//+} d
	if [[ -n $mirrors ]]; then
		for d in "$mirrors/$flat/repo" "$mirrors/$flat" "$mirrors/$flat.git" "$mirrors/$repo" "$mirrors/$repo.git"; do
			if [[ -d $d ]] && git -C "$d" rev-parse --git-dir >/dev/null 2>&1; then
				printf '%s\n' "$d"
				return
			fi
		done
		echo "report.sh: no clone of $repo under $mirrors" >&2
		return 1
	fi
	d=$cache/$flat.git
	if [[ ! -d $d ]]; then
		mkdir -p "$cache"
		# Only the workflow files are read: a blobless bare clone fetches them on demand.
		git clone --quiet --bare --filter=blob:none "https://github.com/$repo" "$d" >&2
	fi
	if ! git -C "$d" cat-file -e "$commit^{commit}" 2>/dev/null; then
		git -C "$d" fetch --quiet --filter=blob:none origin "$commit" >&2
	fi
	printf '%s\n' "$d"
}

# extract writes every listed workflow under files/owner+name/.github/workflows/, where
# Gantry reads it as a workflow whatever it holds, as GitHub does.
extract() {
	local repo commit paths d p out missing=0
	rm -rf -- "$files"
	mkdir -p "$files"
	while IFS=$'\t' read -r repo commit paths; do
		[[ $repo == repo || -z $repo || $repo == \#* ]] && continue
		d=$(gitdir "$repo" "$commit") || return 1
		git -C "$d" cat-file -e "$commit^{commit}" 2>/dev/null || {
			echo "report.sh: $repo has no commit $commit" >&2
			return 1
		}
		IFS=, read -r -a ps <<<"$paths"
		for p in "${ps[@]}"; do
			out=$files/${repo/\//+}/$p
			mkdir -p "$(dirname -- "$out")"
			if ! git -C "$d" show "$commit:$p" >"$out" 2>/dev/null; then
				echo "report.sh: $repo@$commit has no $p" >&2
				rm -f -- "$out"
				missing=$((missing + 1))
			fi
		done
	done <"$list"
	[[ $missing == 0 ]]
}

# validate runs gantry on each file alone, so that a file it cannot read (exit status 2)
# is reported as such rather than stopping the others. It writes results.tsv (file,
# valid|invalid) and errors.tsv (file, line, column, code, path, message), files named
# owner/name/.github/workflows/x.yml.
validate() {
	local f rel json rc msg
	: >"$work/errors.tsv"
	: >"$work/results.tsv"
	while IFS= read -r f; do
		rel=${f#"$files/"}
		rel=${rel/+//}
		# The whole path, which lies under .github/workflows/: Gantry reads such a file as a
		# workflow whatever it holds.
		rc=0
		json=$("$gantry" validate --json "$f" 2>"$work/stderr") || rc=$?
		if [[ $rc == 2 || -z $json ]]; then
			msg=$(head -c 300 "$work/stderr" | tr '\t\n' '  ')
			printf '%s\tinvalid\n' "$rel" >>"$work/results.tsv"
			printf '%s\t0\t0\tunreadable\t\t%s\n' "$rel" "gantry validate exited $rc: $msg" >>"$work/errors.tsv"
			continue
		fi
		jq -r --arg f "$rel" '.files[0] | "\($f)\t\(if .valid then "valid" else "invalid" end)"' <<<"$json" >>"$work/results.tsv"
		# An error in a reusable workflow the file calls is that workflow's, at its lines.
		jq -r --arg f "$rel" --arg files "$files/" '.files[0].errors[] |
			[(if (.file // "") == "" then $f else (.file | ltrimstr($files) | sub("\\+"; "/")) end),
			 .line, .column, .code, .path, (.message | gsub("[\t\n]"; " "))] | @tsv' <<<"$json" >>"$work/errors.tsv"
	done < <(find "$files" -type f \( -name '*.yml' -o -name '*.yaml' \) | LC_ALL=C sort)
	# A called workflow's error, reported again for each file that calls it, counts once.
	awk '!seen[$0]++' "$work/errors.tsv" >"$work/errors.tsv.new" && mv -- "$work/errors.tsv.new" "$work/errors.tsv"
}

if [[ $reuse == 0 ]]; then
	extract || exit 1
	validate
fi
[[ -z $raw ]] || cp -- "$work/errors.tsv" "$raw"

# normalise turns a message into its reason: what is particular to one file (job, step and
# input names, action versions, quoted values, numbers) is replaced, so the same refusal
# in two workflows reads the same.
normalise() {
	sed -E \
		-e 's/(uses:? "?[^ @"]+)@[^ ")]+/\1@V/g' \
		-e 's/^job [A-Za-z0-9_-]+ calls a reusable workflow \([^)]*\)/job J calls a reusable workflow (W)/' \
		-e 's/\bjob [A-Za-z0-9_-]+ (has|needs|asks|is|cannot)\b/job J \1/g' \
		-e 's/\(they keep: [^)]*\)/(they keep: …)/g' \
		-e 's/(input|shell|unexpected) "([^"]*)"/\1 \x01\2\x02/g' \
		-e 's/"[^"]*"/"…"/g' \
		-e 's/\x01/"/g; s/\x02/"/g' \
		-e "s/(^|[ (,=:])'[^']*'/\\1'…'/g" \
		-e 's/\$\{\{([^}]|\}[^}])*\}\}/${{ … }}/g' \
		-e 's/\b(matrix|env|secrets|inputs|steps|needs|vars)\.[A-Za-z0-9_*-]+\.[A-Za-z0-9_.*-]+/\1.X.Y/g' \
		-e 's/\b(matrix|env|secrets|inputs|steps|needs|vars)\.[A-Za-z0-9_*-]+/\1.X/g' \
		-e 's/\bgithub\.event\.[A-Za-z0-9_.*-]+/github.event.X/g' \
		-e 's/\$[A-Za-z_][A-Za-z0-9_]*/$X/g' \
		-e 's/^matrix [A-Za-z0-9_-]+ computed/matrix X computed/' \
		-e 's/as in [^ ]+@v1$/as in OWNER\/NAME@v1/' \
		-e 's/\b[0-9]+(\.[0-9]+)?\b/N/g' \
		-e 's/\{N\}/{0}/g'
}

# area sorts a reason into what part of the front end refuses it: an expression or context
# (wherever it stands), an action a step uses (its inputs, or an action Gantry does not do),
# runs-on, or the translation of the workflow's own keys. Its input is code, path, reason, tab-separated.
area() {
	awk -F'\t' '{
		a = "workflow keys"
		if ($1 == "expression" || $3 ~ /has no counterpart|in text is not supported|GitHub token|known only|is not set in the workflow/) a = "expression"
		else if ($2 ~ /\.steps\[[0-9]+\]\.(uses|with)/ || $3 ~ /^actions\/|uses actions\/|artifact|^cache path|a cache needs|^uses:? /) a = "action"
		else if ($2 ~ /runs-on/) a = "runs-on"
		print a
	}'
}

total=$(wc -l <"$work/results.tsv")
repos=$(cut -d/ -f1,2 "$work/results.tsv" | sort -u | wc -l)
valid=$(grep -c $'\tvalid$' "$work/results.tsv" || true)
invalid=$((total - valid))
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "0.0"; else printf "%.1f", 100 * a / b }'; }

# errors+.tsv: file, line, column, code, path, message, reason, area.
cut -f6 "$work/errors.tsv" | normalise >"$work/reasons"
paste <(cut -f4,5 "$work/errors.tsv") "$work/reasons" | area >"$work/areas"
paste "$work/errors.tsv" "$work/reasons" "$work/areas" >"$work/errors+.tsv"

echo "## GitHub Actions corpus: $(date -u +%Y-%m-%d)"
echo
echo "$total workflow files from $repos repositories ($(basename -- "$list"); $("$gantry" version 2>/dev/null | head -1 || echo 'gantry ?'))."
echo
echo "| | files | share |"
echo "| --- | ---: | ---: |"
echo "| valid | $valid | $(pct "$valid" "$total")% |"
echo "| refused | $invalid | $(pct "$invalid" "$total")% |"
echo
echo "### Refusals by area"
echo
echo "*Files* counts the refused files with at least one error of the area; *only* those"
echo "refused for that area alone."
echo
echo "| area | files | only | errors |"
echo "| --- | ---: | ---: | ---: |"
awk -F'\t' '
	{ n[$8]++; if (!seen[$8 SUBSEP $1]++) { fc[$8]++; areas[$1]++; last[$1] = $8 } }
	END {
		for (f in areas) if (areas[f] == 1) only[last[f]]++
		for (a in n) printf "%d\t%d\t%d\t%s\n", fc[a], only[a] + 0, n[a], a
	}' "$work/errors+.tsv" |
	LC_ALL=C sort -t$'\t' -k1,1nr -k3,3nr -k4,4 |
	awk -F'\t' '{ printf "| %s | %d | %d | %d |\n", $4, $1, $2, $3 }'
echo
echo "### Refusals by reason"
echo
echo "Every error of every refused file, its message normalised: names, versions, quoted"
echo "values, expressions and numbers are replaced, so one refusal reads the same in every"
echo "file. Most files first. *Files* counts the files with the reason at least once; *sole*"
echo "those it is the only reason to refuse; the example is the first file:line with it."
echo
echo "| # | files | sole | errors | area | reason | example |"
echo "| ---: | ---: | ---: | ---: | --- | --- | --- |"
awk -F'\t' '
	{ n[$7]++; ar[$7] = $8; if (!seen[$7 SUBSEP $1]++) { fc[$7]++; reasons[$1]++; last[$1] = $7 }
	  if (!($7 in ex)) ex[$7] = $1 ":" $2 }
	END {
		for (f in reasons) if (reasons[f] == 1) sole[last[f]]++
		for (r in n) printf "%d\t%d\t%d\t%s\t%s\t%s\n", fc[r], sole[r] + 0, n[r], ar[r], r, ex[r]
	}' "$work/errors+.tsv" |
	LC_ALL=C sort -t$'\t' -k1,1nr -k3,3nr -k5,5 |
	awk -F'\t' '{ r = $5; gsub(/\|/, "\\|", r); printf "| %d | %d | %d | %d | %s | %s | `%s` |\n", NR, $1, $2, $3, $4, r, $6 }'
echo
echo "### Refused files"
echo
echo "| file | errors | first error |"
echo "| --- | ---: | --- |"
awk -F'\t' '{ n[$1]++; if (!($1 in first)) first[$1] = $2 ":" $3 ": " $6 }
	END { for (f in n) printf "%s\t%d\t%s\n", f, n[f], first[f] }' "$work/errors.tsv" |
	LC_ALL=C sort |
	while IFS=$'\t' read -r f n first; do
		first=${first:0:200}
		printf '| `%s` | %d | %s |\n' "$f" "$n" "${first//|/\\|}"
	done
