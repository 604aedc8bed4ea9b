#!/bin/bash
# Prints the ids and parameter sizes of nvproxy's tables from NVIDIA's
# headers at one tag, to diff against the parent version's when adding a
# driver version (docs/gpu.md). Usage: probe.sh OPEN_GPU_KERNEL_MODULES_GIT TAG
set -eu
REPO=$1; TAG=$2; HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
git -C "$REPO" archive "$TAG" src/common/sdk/nvidia/inc kernel-open/common/inc \
    kernel-open/nvidia-uvm/uvm_ioctl.h kernel-open/nvidia-uvm/uvm_linux_ioctl.h \
    kernel-open/nvidia-uvm/uvm_types.h src/nvidia/arch/nvalloc/unix/include | tar -x -C "$W"
R=$W/src/common/sdk/nvidia/inc
(cd "$R" && ls ctrl/*.h ctrl/*/*.h class/*.h) | sed 's/.*/#include "&"/' > "$W/all.h"
# controls.txt: NAME [video|graphics] [=PARAMS_STRUCT or =- for none];
# classes.txt: NAME PARAMS_STRUCT|- [graphics|video].
{
    printf '#include <stdio.h>\n#include "nvtypes.h"\n#include "nvos.h"\n#include "all.h"\nint main(void){\n'
    while read -r name a b; do
        cap=cu; st=$(echo "$name" | sed 's/_CMD_/_/')_PARAMS
        for w in $a $b; do case $w in =*) st=${w#=};; *) cap=$w;; esac; done
        sz="sizeof($st)"; [ "$st" = - ] && sz=0
        printf 'printf("ctl %s %%#x %%zu %s\\n",(unsigned)%s,(size_t)%s);\n' "$name" "$cap" "$name" "$sz"
    done < "$HERE/controls.txt"
    while read -r name st cap; do
        sz="sizeof($st)"; [ "$st" = - ] && sz=0
        printf 'printf("cls %s %%#x %%zu %s\\n",(unsigned)%s,(size_t)%s);\n' "$name" "${cap:-cu}" "$name" "$sz"
    done < "$HERE/classes.txt"
    printf 'return 0;}\n'
} > "$W/tables.c"
I="-I$R -I$W/kernel-open/common/inc -I$W/kernel-open/nvidia-uvm -I$W/src/nvidia/arch/nvalloc/unix/include -I$W"
for p in "$W/tables.c" "$HERE/structs.c" "$HERE/lists.c"; do
    gcc $I -DNV_LINUX -o "$W/probe" "$p" && "$W/probe"
done
