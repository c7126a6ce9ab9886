package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"

	"github.com/cairn-gateway/cairn/buffer/syncfile"
)

// serviceGroup is the group the service runs as (systemd/cairn.service,
// packaging/sysusers.conf): cairn passwd lets it read the files it makes.
const serviceGroup = "cairn"

// checkSecretMode refuses a secret file that others may read, that
// anyone but its owner may write, or that its group may read unless root
// owns it. root:cairn with mode 0640 is the administrator sharing a file
// with the service, as PostgreSQL allows for its key files; a group that
// may read a file of another user's is that user's doing, not the
// administrator's.
func checkSecretMode(path string, fi fs.FileInfo) error {
	perm := fi.Mode().Perm()
	st, _ := fi.Sys().(*syscall.Stat_t)
	rootOwned := st != nil && st.Uid == 0
	if perm&0o037 == 0 && (perm&0o040 == 0 || rootOwned) {
		return nil
	}
	return fmt.Errorf("%s is readable by group or others (mode %04o); run: chmod 600 %s (a file of root's may be 0640 for its group: chgrp %s %s; chmod 640 %s)",
		path, perm, path, serviceGroup, path, path)
}

// explainSecretOpen adds to an error opening a secret file what to do
// when it is a permission denied.
func explainSecretOpen(path string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	who := strconv.Itoa(os.Geteuid())
	if u, uerr := user.Current(); uerr == nil {
		who = u.Username
	}
	return fmt.Errorf("%w: user %s may not read it; for the service, make it root's with group %s and mode 0640: chown root:%s %s; chmod 640 %s (cairn passwd makes new files so)",
		err, who, serviceGroup, serviceGroup, path, path)
}

// passwdOwner is who owns a password file and its mode.
type passwdOwner struct {
	perm     fs.FileMode
	uid, gid int // -1: as created
	group    string
}

// passwordFileOwner returns what a password file that cairn passwd writes
// is to be: an existing file keeps its owner, group and mode; a new one
// is group serviceGroup's to read (0640) when that group exists and this
// user may give it files (root, or a member), else 0600.
func passwordFileOwner(file string) passwdOwner {
	if fi, err := os.Stat(file); err == nil {
		o := passwdOwner{perm: fi.Mode().Perm(), uid: -1, gid: -1}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			o.uid, o.gid = int(st.Uid), int(st.Gid)
		}
		return o
	}
	own := passwdOwner{perm: 0o600, uid: -1, gid: -1}
	g, err := user.LookupGroup(serviceGroup)
	if err != nil {
		return own
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return own
	}
	if groups, _ := os.Getgroups(); os.Geteuid() != 0 && !slices.Contains(groups, gid) && os.Getegid() != gid {
		return own
	}
	return passwdOwner{perm: 0o640, uid: -1, gid: gid, group: serviceGroup}
}

// write replaces file with data, owned and with the mode of o.
func (o passwdOwner) write(file string, data []byte) error {
	if err := syncfile.Replace(file, data, o.perm); err != nil {
		return err
	}
	if o.uid == -1 && o.gid == -1 {
		return nil
	}
	return os.Chown(file, o.uid, o.gid)
}

// String says the file's mode, and its group when that is the service's.
func (o passwdOwner) String() string {
	if o.group != "" {
		return fmt.Sprintf("mode %04o, group %s: the service may read it", o.perm, o.group)
	}
	return fmt.Sprintf("mode %04o", o.perm)
}
