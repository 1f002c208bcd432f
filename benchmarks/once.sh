# Sourced by the measurement scripts: their two steps that take long and may be stopped part
# way (a training, a scoring), each done once, so that a script run again goes on where it
# stopped and never takes a stopped step for a finished one.

fit_once() {  # FOLDER LOG LABEL fit-args...: `synlm fit` into FOLDER, timed as LABEL in LOG
  # A finished run is marked by FOLDER/finished, written once fit returns: Lightning writes
  # last.ckpt at every validation, so a checkpoint alone does not say the run ended. A run
  # stopped after a checkpoint continues from it bit for bit (--ckpt_path last, in the same
  # version folder); one stopped before any checkpoint starts again from nothing.
  local folder=$1 log=$2 label=$3
  shift 3
  if [ -e "$folder/finished" ]; then return; fi
  if ! ls "$folder"/version_*/checkpoints/last.ckpt > /dev/null 2>&1; then
    rm -rf "$folder" "$log"
  fi
  /usr/bin/time -f "$label %e s" synlm fit "$@" --trainer.default_root_dir="$folder" \
    --ckpt_path last >> "$log" 2>&1
  touch "$folder/finished"
}

# How score_once starts synlm: a script may put a launcher before it (torchrun).
synlm_command=(synlm)

score_once() {  # OUTPUT LOG LABEL synlm-args...: synlm's standard output into OUTPUT, timed
  # as LABEL in LOG (wall, then user and system CPU seconds); OUTPUT appears only once the
  # command has finished (a stopped one leaves OUTPUT.partial, written over when the step runs
  # again).
  local output=$1 log=$2 label=$3
  shift 3
  if [ -s "$output" ]; then return; fi
  /usr/bin/time -f "$label %e s, CPU %U + %S s" "${synlm_command[@]}" "$@" \
    > "$output.partial" 2> "$log"
  mv "$output.partial" "$output"
}
