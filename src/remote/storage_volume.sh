#!/bin/sh
# storage_volume.sh: make a volume's filesystem if, and only if, the device has none; record it
# in /etc/fstab by UUID; mount it. Runs after file_lib.sh. Idempotent, and it formats only a
# blank device: one with nothing blkid recognises (a filesystem, a partition table, LVM, RAID,
# swap) and a first MiB of zeros. Data on a re-attached volume (a healed storage server) is kept.
#
# /etc/fstab gets one entry of ours per mount point, the line after a
# `# mgmt-driver: volume for DIR` marker, `UUID=... DIR TYPE defaults,nofail 0 2` (`nofail`: a
# detached volume does not stop the VM from booting). An older entry of ours for DIR is
# replaced; an entry that is not ours for DIR is refused unless it names the same UUID.
# The mount itself is by device path (the fstab line serves boots).
#
# The last line printed is `filesystem=made|kept type=TYPE uuid=UUID` for the driver.
#
# Usage: storage_volume.sh DEVICE DIR
#   DEVICE  the block device (a /dev path; a /dev/disk/by-id link is followed)
#   DIR     the mount point (absolute; created when missing)
# Exit status: 0 done; 1 a step failed; 2 bad usage; 3 no such block device; 4 the device holds
# something that is not a filesystem, or DIR is taken by another device or fstab entry.

fstab=/etc/fstab
die() {
    code=$1
    shift
    printf 'storage_volume.sh: %s\n' "$*" >&2
    exit "$code"
}
[ $# -eq 2 ] || die 2 'usage: storage_volume.sh DEVICE DIR'
dev=$1 dir=$2
case $dev in
/dev/*) ;;
*) die 2 "not a device path: $dev" ;;
esac
case $dir in
/*) ;;
*) die 2 "not an absolute path: $dir" ;;
esac
case $dev$dir in
*[!A-Za-z0-9_.:/+-]*) die 2 "refused characters in $dev or $dir" ;;
esac
real=$(readlink -f -- "$dev") || die 3 "$dev does not exist (is the volume attached?)"
[ -b "$real" ] || die 3 "$dev is not a block device (is the volume attached?)"

probe() { blkid -p -o value -s "$1" -- "$real" 2>/dev/null || true; }
fstype=$(probe TYPE)
made=kept
if [ -z "$fstype" ]; then
    pttype=$(probe PTTYPE)
    [ -z "$pttype" ] || die 4 "$dev holds a $pttype partition table and no filesystem; not formatting it"
    # blkid knows no signature: format only a blank device (its first MiB all zeros, as a new
    # volume is), never one that holds data in a format blkid does not know, or that reads fail on.
    head -c 1048576 -- "$real" >/dev/null || die 1 "cannot read $dev"
    nonzero=$(head -c 1048576 -- "$real" | tr -d '\000' | head -c 1 | wc -c)
    [ "$nonzero" -eq 0 ] || die 4 "$dev holds data in no format blkid knows; not formatting it"
    mkfs.ext4 -q -- "$real" >&2 || die 1 "mkfs.ext4 $dev failed"
    fstype=ext4
    made=made
fi
case $fstype in
ext2 | ext3 | ext4 | xfs | btrfs) ;;
*) die 4 "$dev holds $fstype, not a filesystem to mount; not formatting it" ;;
esac
uuid=$(probe UUID)
case $uuid in
'' | *[!A-Za-z0-9-]*) die 1 "cannot read the UUID of $dev" ;;
esac

# /etc/fstab: drop our older entry for DIR, refuse a foreign one.
[ -e "$fstab" ] || : >"$fstab" || die 1 "cannot create $fstab"
foreign=$(MGMT_DIR=$dir awk '
    /^# mgmt-driver: volume for / { ours = 1; next }
    !ours && $0 !~ /^[ \t]*#/ && $2 == ENVIRON["MGMT_DIR"] { print $1 }
    { ours = 0 }
' "$fstab")
if [ -n "$foreign" ] && [ "$foreign" != "UUID=$uuid" ]; then
    die 4 "$fstab already mounts $foreign at $dir"
fi
if [ -z "$foreign" ]; then
    tmp=$(new_copy "$fstab") || exit 1
    trap 'rm -f -- "$tmp"' EXIT
    MGMT_DIR=$dir awk '
        $0 == "# mgmt-driver: volume for " ENVIRON["MGMT_DIR"] { skip = 1; next }
        skip { skip = 0; if ($2 == ENVIRON["MGMT_DIR"]) next }
        { print }
    ' "$fstab" >"$tmp" || exit 1
    printf '# mgmt-driver: volume for %s\nUUID=%s %s %s defaults,nofail 0 2\n' "$dir" "$uuid" "$dir" "$fstype" >>"$tmp" || exit 1
    if cmp -s -- "$tmp" "$fstab"; then
        rm -f -- "$tmp"
    else
        replace_file "$tmp" "$fstab"
    fi
fi

# The mount: already there (the same device) or made now.
mkdir -p -- "$dir" || die 1 "cannot create $dir"
want=$(stat -L -c '%t:%T' -- "$real") || die 1 "cannot stat $dev"
if mountpoint -q -- "$dir"; then
    have=$(mountpoint -d -- "$dir")
    want_dec=$(printf '%d:%d' "0x${want%%:*}" "0x${want##*:}")
    [ "$have" = "$want_dec" ] || die 4 "another device ($have) is mounted at $dir"
else
    mount -t "$fstype" -- "$real" "$dir" || die 1 "mount $dev $dir failed"
fi
printf 'filesystem=%s type=%s uuid=%s\n' "$made" "$fstype" "$uuid"
