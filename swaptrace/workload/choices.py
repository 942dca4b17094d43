"""The names a user may choose among for traces (generate's row layouts, export's formats), with no heavy
import, so a command's options and help can list them without loading the generator."""

#: --row-layout: rows scattered over their table's pages (True) or the hottest rows packed together (False)
ROW_LAYOUTS = {"scattered": True, "packed": False}
#: swaptrace export --format
FORMATS = ("libcachesim", "csv", "mqsim")
