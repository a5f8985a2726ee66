#!/usr/bin/env bash
# expect_exit.sh CODE CMD...: passes when CMD exits with CODE and prints an error message.
want=$1; shift
err=$("$@" 2>&1 >/dev/null); got=$?
echo "exit $got: $err"
[[ $got -eq $want && -n $err ]]
