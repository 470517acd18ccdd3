/*
 * bluectl's thin C shim over libdbus. No logic lives here, only what Swift
 * cannot express or import on its own:
 *  - the DBUS_TYPE_* constants (macros with casts do not import into Swift);
 *  - constructors that validate their arguments first, because libdbus
 *    aborts the whole process on an invalid object path, interface or member
 *    name, or on a string that is not valid UTF-8 ("checks" are fatal in
 *    Debian's build);
 *  - pthread_setname_np, a GNU extension that Glibc's Swift overlay hides;
 *  - mallopt and M_ARENA_MAX (<malloc.h>, which Glibc's Swift module leaves out);
 *  - prctl(PR_SET_THP_DISABLE), which Swift cannot call (prctl is variadic).
 */
#ifndef BLUECTL_SHIM_H
#define BLUECTL_SHIM_H

#include <dbus/dbus.h>
#include <stdbool.h>
#include <malloc.h>      /* mallopt: the command line's limit on malloc arenas */
#include <sys/eventfd.h> /* the I/O thread's wake-up descriptor */

enum {
    BLUECTL_TYPE_INVALID     = DBUS_TYPE_INVALID,
    BLUECTL_TYPE_BYTE        = DBUS_TYPE_BYTE,
    BLUECTL_TYPE_BOOLEAN     = DBUS_TYPE_BOOLEAN,
    BLUECTL_TYPE_INT16       = DBUS_TYPE_INT16,
    BLUECTL_TYPE_UINT16      = DBUS_TYPE_UINT16,
    BLUECTL_TYPE_INT32       = DBUS_TYPE_INT32,
    BLUECTL_TYPE_UINT32      = DBUS_TYPE_UINT32,
    BLUECTL_TYPE_INT64       = DBUS_TYPE_INT64,
    BLUECTL_TYPE_UINT64      = DBUS_TYPE_UINT64,
    BLUECTL_TYPE_DOUBLE      = DBUS_TYPE_DOUBLE,
    BLUECTL_TYPE_STRING      = DBUS_TYPE_STRING,
    BLUECTL_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH,
    BLUECTL_TYPE_SIGNATURE   = DBUS_TYPE_SIGNATURE,
    BLUECTL_TYPE_UNIX_FD     = DBUS_TYPE_UNIX_FD,
    BLUECTL_TYPE_ARRAY       = DBUS_TYPE_ARRAY,
    BLUECTL_TYPE_VARIANT     = DBUS_TYPE_VARIANT,
    BLUECTL_TYPE_STRUCT      = DBUS_TYPE_STRUCT,
    BLUECTL_TYPE_DICT_ENTRY  = DBUS_TYPE_DICT_ENTRY,
};

enum {
    BLUECTL_MESSAGE_TYPE_INVALID       = DBUS_MESSAGE_TYPE_INVALID,
    BLUECTL_MESSAGE_TYPE_METHOD_CALL   = DBUS_MESSAGE_TYPE_METHOD_CALL,
    BLUECTL_MESSAGE_TYPE_METHOD_RETURN = DBUS_MESSAGE_TYPE_METHOD_RETURN,
    BLUECTL_MESSAGE_TYPE_ERROR         = DBUS_MESSAGE_TYPE_ERROR,
    BLUECTL_MESSAGE_TYPE_SIGNAL        = DBUS_MESSAGE_TYPE_SIGNAL,
};

/* Names the calling thread (Linux shows the first 15 bytes). 0 or an errno. */
int bluectl_name_this_thread(const char *name);

/* prctl(PR_SET_THP_DISABLE, 1): no transparent huge pages for this process. 0, or -1
 * and errno. */
int bluectl_disable_transparent_huge_pages(void);

/* Validators: true when libdbus would accept the string. NULL is invalid. */
bool bluectl_valid_path(const char *path);
bool bluectl_valid_interface(const char *name);
bool bluectl_valid_member(const char *name);
bool bluectl_valid_error_name(const char *name);
bool bluectl_valid_bus_name(const char *name);
bool bluectl_valid_utf8(const char *text);
bool bluectl_valid_signature(const char *signature);

/* Validated constructors: NULL (and nothing aborted) when an argument is
 * invalid or memory ran out. `destination` and `interface` may be NULL. */
DBusMessage *bluectl_message_new_method_call(const char *destination, const char *path,
                                             const char *interface, const char *method);
DBusMessage *bluectl_message_new_signal(const char *path, const char *interface,
                                        const char *name);
DBusMessage *bluectl_message_new_error(DBusMessage *reply_to, const char *error_name,
                                       const char *text);

#endif
