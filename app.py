"""cogbias app: navigation only; each page is a thin script in app_pages/.

Not in `pages/`: Streamlit lists a folder of that name as an old-style multipage app, with
every helper module as a page, until app.py has run once.

On first start an empty database receives the demo snapshot (`cogbias.store.demo`), so Explore
shows real results at once; set COGBIAS_DEMO=0 to start empty.
"""

import threading
from pathlib import Path

import streamlit as st

from app_pages._common import attempt, db_path, load_secrets_into_env
from app_pages._warm import page_imports, script_running, warm_up
from cogbias.store.demo import ensure_demo

st.set_page_config(page_title="cogbias", page_icon="🧠", layout="wide")


# Seconds between the end of the first page's script and the warm-up: the browser is still
# drawing that page then, and the warm-up would take the interpreter from the server.
WARM_UP_DELAY = 1.5


@st.cache_resource(show_spinner=False)
def _prepare(db: str) -> bool:
    """Once per database per server process: keys from secrets, demo data if empty."""
    load_secrets_into_env()
    return bool(attempt("Loading the demo results", lambda: ensure_demo(db)))


@st.cache_resource(show_spinner=False)
def _warm_up_soon() -> None:
    """Once per server process, after the first page's script: started with the first page,
    the warm-up's imports held the interpreter for ~1.5 s and so delayed that page's drawing
    by about as much (Python runs one thread at a time). What the pages import is read here,
    in the script's thread (`page_imports` says why)."""
    timer = threading.Timer(WARM_UP_DELAY, warm_up, args=(page_imports(),))
    timer.name, timer.daemon = "cogbias-warm-up", True
    timer.start()


_prepare(str(db_path()))
# Streamlit keeps a multiselect's chips on one line and scrolls them sideways, so with two
# models chosen the first chip is cut off; let them wrap onto a second line instead.
st.html(
    "<style>[data-testid='stMultiSelectTagsContainer']"
    "{flex-wrap: wrap; overflow: visible; height: auto}"
    "[data-testid='stMultiSelect'] div:has(> [data-testid='stMultiSelectTagsContainer']),"
    "[data-testid='stMultiSelect'] div:has(> div > [data-testid='stMultiSelectTagsContainer'])"
    "{height: auto; max-height: none}</style>"
)

HERE = Path(__file__).parent
measure = [
    st.Page("app_pages/run.py", title="Run", icon=":material/play_circle:"),
    st.Page("app_pages/explore.py", title="Explore", icon=":material/grid_on:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
]
if (HERE / "app_pages/datasets.py").exists():  # written separately; shown once it exists
    measure.append(st.Page("app_pages/datasets.py", title="Datasets", icon=":material/dataset:"))
measure.append(st.Page("app_pages/studies.py", title="Studies", icon=":material/lab_profile:"))
measure.append(
    st.Page("app_pages/tokenbias.py", title="Token bias", icon=":material/compare_arrows:")
)
pages = {
    "Learn and author": [
        st.Page("app_pages/learn.py", title="Learn", icon=":material/school:", default=True),
        st.Page("app_pages/templates.py", title="Templates", icon=":material/edit_note:"),
        st.Page("app_pages/preview.py", title="Preview", icon=":material/science:"),
        st.Page("app_pages/classroom.py", title="Class", icon=":material/groups:"),
        st.Page("app_pages/projector.py", title="Projector", icon=":material/present_to_all:"),
    ],
    "Measure": measure,
    "Settings": [st.Page("app_pages/settings.py", title="Models", icon=":material/tune:")],
}
with script_running():  # the warm-up waits while a page's script runs
    st.navigation(pages).run()
_warm_up_soon()
