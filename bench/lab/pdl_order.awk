# Reads `cuobjdump --dump-sass` and prints, per kernel, its PDL instructions (PREEXIT =
# griddepcontrol.launch_dependents, ACQBULK = griddepcontrol.wait) among its memory
# instructions in program order, up to 16 past the first wait, run-length encoded:
#   direct_one_token_kernel...: PREEXIT LDG.NA.128x8 STS ACQBULK LDG.128 ...
# ptxas may move the wait above loads written before it (device_common.cuh,
# keep_loads_before_wait); this shows where each kernel's loads really sit.
function emit() {
  if (prev != "") seq = seq " " prev (count > 1 ? "x" count : "")
}
function flush() {
  emit()
  if (name != "") print name ":" seq
  seq = ""; prev = ""; count = 0; past_wait = 0; waited = 0
}
/Function :/ { flush(); name = $3; next }
{
  if (name == "" || past_wait > 16) next
  if (!match($0, /(PREEXIT|ACQBULK|LDGSTS|LDGDEPBAR|LDG|UBLKCP|UTMALDG|SYNCS[.A-Z]*|BAR\.[A-Z]+|STS|LDS|MEMBAR)[.A-Z0-9]*/)) next
  op = substr($0, RSTART, RLENGTH)
  gsub(/\.E|\.CONSTANT|\.DEFER_BLOCKING|\.STRONG\.GPU|\.U16|\.64/, "", op)
  if (waited) past_wait++
  if (op ~ /ACQBULK/) waited = 1
  if (op == prev) { count++ } else { emit(); prev = op; count = 1 }
}
END { flush() }
