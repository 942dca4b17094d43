"""The names a user may choose among for fio jobs, with no heavy import, so a command's options and help can
list them without loading the job writer."""

#: --ioengine: the engines a job folder may use (each checked by fio --parse-only too)
IOENGINES = ("psync", "sync", "pvsync", "pvsync2", "vsync", "libaio", "io_uring", "posixaio", "mmap", "null")
