#!/usr/bin/env bash
# Runs scripts/bench.sh in a small QEMU virtual machine whose kernel gives
# cgroup v2's memory controller to the bench, for hosts where it cannot have
# it (the memory controller bound to cgroup v1, or no rights to make a
# cgroup). The default case is cgroup_drain, which wants a v2 memory cgroup
# beside the script's own.
#
#   scripts/vm-cgroup2.sh [CASE...]     default: cgroup_drain
#
# The machine (2 vCPUs, VM_MEM_MIB of memory) boots a Debian kernel with a
# small initramfs made here with busybox. Its root is this host's root
# filesystem shared READ-ONLY over virtio-9p; /tmp is a fresh ext4 disk
# image (the bench's data dirs, Go's build cache seeded by building here
# first, a copy of the work tree: it runs at $VM_DIR/src, as built here),
# /run, /var/tmp and /dev/shm are tmpfs. Its init mounts cgroup2 alone at
# /sys/fs/cgroup (cgroup_no_v1=all), gives memory and pids to the root's
# children, brings up loopback, and runs bench.sh as root in the root
# cgroup, on a copy of the work tree as it is (uncommitted changes
# included), with GOPROXY=off: Go, its module cache, python3, taskset and
# victoria-metrics are those of this host. The machine has no network
# but loopback. It powers itself off when the bench ends.
#
# Needs: root, qemu-system-x86, busybox-static, kmod, e2fsprogs, and a
# kernel with 9p as modules: apt-get install qemu-system-x86 busybox-static
# linux-image-amd64 (the -cloud- flavour has no 9p). KVM is used when
# /dev/kvm opens and is not PVM (which boots only PVM guest kernels), TCG
# emulation (several times slower) otherwise. What the bench itself needs
# must be on the host: Go and the module cache, python3, taskset,
# victoria-metrics for the uplink cases.
#
# Environment:
#   VM_DIR=DIR       where the initramfs, the disk image and the output go
#                    (default ${TMPDIR:-/tmp}/cairn-vm-cgroup2; emptied first)
#   VM_KERNEL=VER    the kernel version under /boot and /lib/modules
#                    (default: the newest one with 9p modules)
#   VM_MEM_MIB=N     the machine's memory (default 4096)
#   VM_DISK_GIB=N    the size of the /tmp disk image, sparse (default 16)
#   VM_ACCEL=A       kvm or tcg (default kvm when /dev/kvm opens, not PVM)
#   VM_TIMEOUT=S     seconds before the machine is stopped (default 7200)
#   BENCH_*, UPLINK_*, CGROUP_*, ... bench.sh's own variables are passed in;
#                    BENCH_RUNS defaults to 1 here.
#
# Output: the bench's stdout (the summary) is printed, its stderr (progress)
# goes to stderr; both, the machine's console, and what the machine saw of
# cgroups (/proc/self/cgroup, cgroup.controllers, the kernel) stay in
# $VM_DIR/out. The exit status is the bench's.
set -euo pipefail

# ---- inside the machine: run from init, chrooted into the host's root ----
if [ "${1:-}" = --guest ]; then
	shift
	out=/run/vm-out
	# shellcheck disable=SC1091 # written by the host side
	. "$out/guest.env"
	export HOME=/root TMPDIR=/tmp GOCACHE=/tmp/go-build GOPROXY=off GOTOOLCHAIN=local
	export PATH="$GO_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	export BENCH_RUNS=${BENCH_RUNS:-1}
	{
		echo "kernel: $(uname -r) $(uname -v)"
		echo "accel: $VM_ACCEL"
		echo "nproc: $(nproc --all)"
		echo "memory: $(awk '$1 == "MemTotal:" { print $2 " kB" }' /proc/meminfo)"
		echo "/proc/self/cgroup:"
		sed 's/^/  /' /proc/self/cgroup
		echo "/sys/fs/cgroup/cgroup.controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
		echo "/sys/fs/cgroup/cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
		echo "go: $(go version)"
	} >"$out/vm-info.txt" 2>&1
	cp /proc/mounts "$out/mounts.txt"
	cat "$out/vm-info.txt"
	# The work tree at the path the host built it at (so that Go's build
	# cache seeded there hits), on the writable disk.
	mkdir -p /tmp/src
	cp -a "$SRC/." /tmp/src/
	mount --bind /tmp/src "$SRC"
	cd "$SRC"
	echo "vm: bench.sh $* (BENCH_RUNS=$BENCH_RUNS) in $PWD"
	started=$(date +%s)
	rc=0
	scripts/bench.sh "$@" >"$out/bench.out" 2> >(tee "$out/bench.err" >&2) || rc=$?
	echo "vm: bench.sh exited $rc after $(($(date +%s) - started)) s"
	echo "$rc $(($(date +%s) - started))" >"$out/bench.rc"
	sync
	exit 0
fi

# ---- on the host -----------------------------------------------------------
cd "$(dirname "$0")/.."
REPO=$PWD
SCRIPT=$REPO/scripts/vm-cgroup2.sh
die() {
	echo "vm-cgroup2: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (qemu's 9p share of / reads every file)"
for tool in qemu-system-x86_64 modprobe mkfs.ext4 cpio gzip go; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install qemu-system-x86 kmod e2fsprogs cpio)"
done
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 || die "$BUSYBOX is missing or not static: apt-get install busybox-static"

VM_DIR=${VM_DIR:-${TMPDIR:-/tmp}/cairn-vm-cgroup2}
VM_MEM_MIB=${VM_MEM_MIB:-4096}
VM_DISK_GIB=${VM_DISK_GIB:-16}
VM_TIMEOUT=${VM_TIMEOUT:-7200}
if [ -z "${VM_ACCEL:-}" ]; then
	# A KVM that is PVM (kvm_pvm, nested in a cloud VM) boots only PVM
	# guest kernels: a stock kernel hangs before its first line there.
	VM_ACCEL=tcg
	if [ -e /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && (exec 3<>/dev/kvm) 2>/dev/null; then VM_ACCEL=kvm; fi
fi
if [ -z "${VM_KERNEL:-}" ]; then
	for v in $(ls -1 /lib/modules | sort -rV); do
		if [ -f "/boot/vmlinuz-$v" ] && modprobe -S "$v" --show-depends 9pnet_virtio >/dev/null 2>&1 &&
			modprobe -S "$v" --show-depends 9p >/dev/null 2>&1; then
			VM_KERNEL=$v
			break
		fi
	done
	[ -n "${VM_KERNEL:-}" ] || die "no kernel under /boot with 9p modules: apt-get install linux-image-amd64"
fi
[ -f "/boot/vmlinuz-$VM_KERNEL" ] || die "no /boot/vmlinuz-$VM_KERNEL"
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(cgroup_drain)

rm -rf "$VM_DIR"
mkdir -p "$VM_DIR/initramfs" "$VM_DIR/out"
VM_DIR=$(cd "$VM_DIR" && pwd)
out=$VM_DIR/out

# The modules init loads, in order, with what they depend on.
ird=$VM_DIR/initramfs
mkdir -p "$ird"/{bin,dev,proc,sys,newroot,out,lib/modules}
cp "$BUSYBOX" "$ird/bin/busybox"
n=0
for m in virtio_pci virtio_blk 9pnet_virtio 9p ext4; do
	modprobe -S "$VM_KERNEL" --show-depends "$m" || die "no module $m for $VM_KERNEL"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$VM_DIR/modules.txt"
while read -r ko; do
	n=$((n + 1))
	name=$(basename "$ko")
	name=${name%.xz} name=${name%.zst} name=${name%.gz}
	dst=$ird/lib/modules/$(printf '%02d' "$n")-$name
	case $ko in
	*.xz) xz -dc "$ko" >"$dst" ;;
	*.zst) zstd -qdc "$ko" >"$dst" ;;
	*.gz) gzip -dc "$ko" >"$dst" ;;
	*) cp "$ko" "$dst" ;;
	esac
done <"$VM_DIR/modules.txt"

cat >"$ird/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in /lib/modules/*.ko; do insmod "$m" || echo "init: insmod $m failed"; done
fail() { echo "init: $*"; sleep 2; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /newroot || fail "mounting the host's root failed"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmout /out || fail "mounting the output share failed"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup || fail "mounting cgroup2 failed"
echo "+memory +pids" >/newroot/sys/fs/cgroup/cgroup.subtree_control || fail "enabling memory in the root's subtree_control failed"
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
ln -s /proc/self/fd /newroot/dev/fd
ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout
ln -s /proc/self/fd/2 /newroot/dev/stderr
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t ext4 /dev/vda /newroot/tmp || fail "mounting the /tmp disk failed"
chmod 1777 /newroot/tmp
mount -t tmpfs -o mode=755 tmpfs /newroot/run
mount -t tmpfs -o mode=1777 tmpfs /newroot/var/tmp
mkdir -p /newroot/run/vm-out
mount --bind /out /newroot/run/vm-out
ip link set lo up
hostname cairn-vm
. /out/init.env
chroot /newroot /bin/bash "$SCRIPT" --guest $BENCH_CASES </dev/console >/dev/console 2>&1
echo "init: the bench is done; powering off"
sync
umount /newroot/run/vm-out /newroot/tmp 2>/dev/null
poweroff -f
EOF
chmod 755 "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) >"$VM_DIR/initramfs.cpio.gz"

# What init (busybox sh) and the guest side are told: paths, the cases,
# bench.sh's variables.
printf "SCRIPT='%s'\nBENCH_CASES='%s'\n" "$SCRIPT" "${cases[*]}" >"$out/init.env"
{
	printf 'GO_BIN=%q\nVM_ACCEL=%q\n' "$(dirname "$(command -v go)")" "$VM_ACCEL"
	env | awk -F= '$1 ~ /^(BENCH|UPLINK|CGROUP|PRUNING|SDWEAR|WINDOW1|STORAGE|RETENTION|DASHBOARD|SOAK|CAIRN)_/ { print $1 }' |
		while read -r v; do printf 'export %s=%q\n' "$v" "${!v}"; done
} >"$out/guest.env"

# A copy of the work tree as it is, and Go's build cache seeded with both
# of bench.sh's builds of it (the plain one and the release one), made here
# at full speed and carried into the machine's /tmp disk: under TCG the
# builds would take many minutes.
echo "vm-cgroup2: copying the work tree to $VM_DIR/src, building it to seed the machine's Go build cache" >&2
mkdir -p "$VM_DIR/src" "$VM_DIR/disk"
cp -a "$REPO/." "$VM_DIR/src/"
(
	cd "$VM_DIR/src"
	export GOCACHE=$VM_DIR/disk/go-build GOPROXY=off GOTOOLCHAIN=local
	go build -o /dev/null ./cmd/cairn
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags "$(tr -d ' \n' <scripts/release-tags)" -ldflags "-s -w" \
		-o /dev/null ./cmd/cairn
) || die "building cairn on the host failed"
printf 'SRC=%q\n' "$VM_DIR/src" >>"$out/guest.env"
truncate -s "${VM_DISK_GIB}G" "$VM_DIR/tmp.img"
mkfs.ext4 -q -F -L vmtmp -d "$VM_DIR/disk" "$VM_DIR/tmp.img"
rm -rf "$VM_DIR/disk"

accel=(-accel tcg -cpu max)
[ "$VM_ACCEL" = tcg ] || accel=(-accel kvm -cpu host)
echo "vm-cgroup2: kernel $VM_KERNEL, $VM_ACCEL, 2 vCPUs, $VM_MEM_MIB MiB; bench.sh ${cases[*]}; console in $out/console.log" >&2
started=$(date +%s)
rc=0
timeout -k 10 "$VM_TIMEOUT" qemu-system-x86_64 "${accel[@]}" -smp 2 -m "$VM_MEM_MIB" \
	-nographic -no-reboot -nic none \
	-kernel "/boot/vmlinuz-$VM_KERNEL" -initrd "$VM_DIR/initramfs.cpio.gz" \
	-append "console=ttyS0 loglevel=4 panic=1 cgroup_no_v1=all rdinit=/init" \
	-drive "file=$VM_DIR/tmp.img,format=raw,if=virtio" \
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-fsdev "local,id=vmout,path=$out,security_model=none" \
	-device virtio-9p-pci,fsdev=vmout,mount_tag=vmout \
	</dev/null >"$out/console.log" 2>&1 || rc=$?
echo "vm-cgroup2: the machine ran $(($(date +%s) - started)) s (qemu exit status $rc)" >&2
[ -f "$out/bench.rc" ] || die "the bench did not finish in the machine; see $out/console.log"
[ ! -f "$out/vm-info.txt" ] || sed 's/^/vm: /' "$out/vm-info.txt" >&2
cat "$out/bench.err" >&2
cat "$out/bench.out"
read -r brc secs <"$out/bench.rc"
echo "vm-cgroup2: bench.sh exited $brc after $secs s in the machine" >&2
exit "$brc"
