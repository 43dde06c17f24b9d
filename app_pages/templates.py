"""Templates: write and edit test cases with live validation, gap highlighting and the diff."""

import dataclasses

import streamlit as st

from app_pages import _editor, _pair
from app_pages._common import attempt, case_label, friendly, keep, scenarios, test_cases
from cogbias.library import testcases as library
from cogbias.library.testcases import LibraryError
from cogbias.views import authoring, highlight, safe_text

EDITOR = "tpl_text"
st.title("Templates: author a test case")
st.caption(
    "A test case is a TOML file (format: docs/format.md). Edit it below: it is checked as you "
    "type, and each problem is marked at its line in the editor and listed under it. Built-in "
    "test cases are never overwritten: saving one stores a copy under a new id in your library."
)

cases = test_cases()
keep("tpl_seed")  # the draft itself is page state, not a widget's: a page switch keeps it
if EDITOR not in st.session_state:
    st.session_state[EDITOR] = authoring.BLANK_TEST_CASE
if "tpl_seed" not in st.session_state:
    st.session_state["tpl_seed"] = 0


def _load(text: str) -> None:
    st.session_state[EDITOR] = text
    st.session_state.pop("tpl_saved", None)


with st.expander("Start from…", expanded=False):
    c1, c2 = st.columns([3, 1])
    source = c1.selectbox("A copy of", list(cases), format_func=case_label(cases), key="tpl_source")
    c2.button(
        "Load copy",
        key="tpl_load_copy",
        on_click=lambda: _load(library.to_toml(cases[st.session_state["tpl_source"]])),
    )
    st.button("Blank skeleton", key="tpl_blank", on_click=lambda: _load(authoring.BLANK_TEST_CASE))
    upload = st.file_uploader("Import a .toml file", type=["toml"], key="tpl_upload")
    if upload is not None and st.session_state.get("tpl_upload_id") != upload.file_id:
        st.session_state["tpl_upload_id"] = upload.file_id
        try:
            _load(upload.getvalue().decode("utf-8"))
            st.rerun()
        except UnicodeDecodeError:
            st.error("That file is not UTF-8 text; save it as UTF-8 and import it again.")

text = _editor.draft(EDITOR)
case = None
problems: list[library.Problem] = []
unreadable = ""
try:
    case = library.parse_test_case(text, file="<editor>")
except LibraryError as exc:
    problems = exc.problems
except Exception as exc:  # validation must never crash the editor
    unreadable = friendly(exc)

st.markdown("**Test case (TOML)**")
_editor.editor(EDITOR, text, problems)
if problems:
    count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
    st.error(
        f"{count} to fix before saving, each marked in red at its line in the editor (point at "
        f"the mark beside the line number to read it there):\n\n{authoring.problem_list(problems)}"
    )
elif unreadable:
    st.error(f"The test case could not be checked: {unreadable}")
elif case is not None:
    name, case_id = safe_text.escape_markdown(case.name), safe_text.escape_markdown(case.id)
    st.success(f"Valid: {name} ({case_id}), {case.n_options} answer options.")


def _save(replace_id: str | None = None) -> None:
    """Save the editor's text; replacing one of the user's own files needs a confirmation
    (`replace_id` is the id the user agreed to replace)."""
    try:
        parsed = library.parse_test_case(st.session_state[EDITOR], file="<editor>")
    except LibraryError as exc:
        st.session_state["tpl_saved"] = ("error", f"Not saved: {friendly(exc)}")
        return
    known = test_cases()
    note = ""
    if parsed.id in known and known[parsed.id].is_builtin:
        original = parsed.id
        new_id = authoring.copy_id(original, known)
        parsed = dataclasses.replace(parsed, id=new_id, name=f"{parsed.name} (copy)")
        note = f" ('{original}' is built in, so this is a copy under a new id)"
    try:
        path = library.save_test_case(parsed, overwrite=replace_id == parsed.id)
    except library.AlreadyExistsError:
        st.session_state["tpl_saved"] = ("confirm", parsed.id)
        return
    except (PermissionError, OSError, LibraryError) as exc:
        st.session_state["tpl_saved"] = ("error", f"Saving failed: {friendly(exc)}")
        return
    st.session_state[EDITOR] = library.to_toml(parsed)
    st.session_state["tpl_saved"] = ("ok", f"Saved '{parsed.id}' to {path}{note}.")


c1, c2 = st.columns(2)
c1.button(
    "Save to my library", type="primary", disabled=case is None, on_click=_save, key="tpl_save"
)
c2.download_button(
    "Export .toml",
    data=text.encode("utf-8"),
    disabled=case is None,  # only a file that loads can be exported
    help=None if case is not None else "Fix the problems listed under the editor to export it.",
    file_name=f"{case.id if case else 'test_case'}.toml",
    mime="application/toml",
    key="tpl_export",
)
saved = st.session_state.get("tpl_saved")
if saved and saved[0] == "confirm":
    st.warning(f"You already have a test case with the id '{saved[1]}'. Replace it?", icon="⚠️")
    st.button("Replace it", key="tpl_replace", on_click=_save, kwargs={"replace_id": saved[1]})
elif saved:
    (st.success if saved[0] == "ok" else st.error)(saved[1])

tab_filled, tab_gaps, tab_diff = st.tabs(["Filled (unsaved draft)", "Gaps", "Control vs treatment"])
with tab_filled:
    if case is None:
        st.info("No preview until the draft loads: fix the problems listed under the editor.")
    else:
        st.columns([1, 3])[0].number_input(
            "Example set (seed)", min_value=0, step=1, key="tpl_seed"
        )
        draft = attempt(
            "Filling the draft",
            lambda: authoring.preview_draft(
                case, scenarios()[0].text, int(st.session_state["tpl_seed"])
            ),
        )
        if draft is not None:
            how = "its values filled" if draft.note else "filled with its own example fills"
            st.caption(
                f"The text in the editor, not saved, {how} offline for the scenario "
                f"“{safe_text.escape_markdown(draft.scenario.rstrip('.'))}”."
            )
            if draft.note:
                st.info(safe_text.escape_markdown(draft.note))
            st.markdown(draft.legend, unsafe_allow_html=True)
            _pair.show_marked_halves(draft.halves)
with tab_gaps:
    st.caption("Blue: [[gaps]] the generator fills. Red: {{values}}. Lines with problems: red.")
    st.markdown(
        '<pre style="white-space:pre-wrap;font-size:0.85em">'
        f"{highlight.highlight_source(text, [p.line for p in problems])}</pre>",
        unsafe_allow_html=True,
    )
with tab_diff:
    if case is None:
        st.info("Fix the problems listed under the editor to see how control and treatment differ.")
    else:
        _pair.show_marked_halves(highlight.case_halves_html(case))

st.subheader("Your library")
mine = {cid: c for cid, c in test_cases().items() if not c.is_builtin}
if not mine:
    st.caption(
        safe_text.escape_markdown(
            "No test cases of your own yet. Write or load one above and press Save to my "
            "library: it is kept in "
            f"{library.user_dir()} and offered on Learn, Preview and Run beside the built-ins."
        )
    )
for cid, c in mine.items():
    st.markdown(
        f"- **{safe_text.escape_markdown(c.name)}** ({safe_text.escape_markdown(cid)}) — {safe_text.escape_markdown(c.path)}"
    )
