/* DIRLIST (integration, upstream: cymongoose-only), vendor/mongoose/inventory.py.
 *
 * Mongoose 7.23's mg_http_serve_dir() lists every directory without an index file (under
 * MG_ENABLE_DIRLIST, which stays on for the listing serve_dir offers), dotfiles included,
 * with "Mongoose v.7.23" in the footer, and no option turns it off. cymongoose lists only
 * when the call asked (serve_dir(directory_listing=True) sets cym_dirlist_allowed around
 * mg_http_serve_dir, for this thread); otherwise the directory gets a 403, as nginx answers
 * with autoindex off. A listing never shows a name that starts with a dot, and carries no
 * version. tests/core/test_serve_dir_safety.py. Not proposed upstream.
 */

// @hunk definitions
_Thread_local int cym_dirlist_allowed = 0;  /* cymongoose build fix: see DIRLIST */

// @hunk listdir
#if MG_ENABLE_DIRLIST
    if (cym_dirlist_allowed) {  /* cymongoose build fix: listed only when asked */
      listdir(c, hm, opts, path);
    } else if (cym_serve_result != NULL) {
      cym_serve_result->kind = CYM_SERVE_FORBIDDEN;  /* STATIC_SERVE: the core answers */
    } else {
      mg_http_reply(c, 403, "", "Forbidden\n");
    }

// @hunk dotfiles
  if (name[0] == '.') return;  /* cymongoose build fix: dotfiles are never listed */

// @hunk footer
            "</table></body></html>\n");  /* cymongoose build fix: no version */
